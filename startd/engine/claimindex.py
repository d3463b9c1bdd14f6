"""The claim index: which slots hold a claim of a given id (HTCondor's ResMgr::getClaimByGlobalJobId and
friends walk every slot; here a claim id leads straight to the few slots to compare).

A claim id is a capability. The index buckets ids by a hash keyed with the engine's own secret, so which
bucket an id falls in says nothing about it, and the ids in the bucket are compared in constant time
(hmac.compare_digest), as every stored id was compared before.
"""

from __future__ import annotations

import hashlib

from .claim import Claim, same_claim_id
from .resource import Slot


class ClaimIndex:
    """Finding a slot by claim id. The machine keeps ``_claim_index`` as slots are given claims."""

    slots: dict[str, Slot]
    _claim_salt: bytes
    _claim_index: dict[bytes, dict[int, Slot]]

    def _find_claim(self, claim_id: str) -> tuple[Slot, Claim, bool] | None:
        """(slot, claim, is_current) for a claim id, current claims first.

        A claim id is a capability: every stored id is compared with the one given in constant time
        (hmac.compare_digest), so how long a refusal takes says nothing about the secret."""
        if not claim_id:
            return None
        given = claim_id.encode()
        found: tuple[Slot, Claim, bool] | None = None
        # Only the slots that were given a claim under this id's keyed hash are compared (the hash's key
        # is this engine's secret, so which bucket an id falls in says nothing about it).
        bucket = self._claim_index.get(self._claim_key(claim_id), {})
        held = [bucket[seq] for seq in sorted(bucket)]
        for s in held:
            if s.claim is not None and same_claim_id(s.claim.id, given) and found is None:
                found = s, s.claim, True
        if found is not None:
            return found
        for s in held:
            for c in (s.pre, s.pending):
                if c is not None and same_claim_id(c.id, given) and found is None:
                    found = s, c, False
        return found

    def _unindex_claim(self, slot: Slot, claim: Claim, field: str | None) -> None:
        """``slot`` no longer holds ``claim`` in ``field`` (None: in any): out of the claim index unless
        it still holds it in another."""
        if field is not None and any(getattr(slot, f) is claim for f in ("claim", "pre", "pending") if f != field):
            return
        key = self._claim_key(claim.id)
        bucket = self._claim_index.get(key)
        if bucket is not None:
            bucket.pop(slot.seq, None)
            if not bucket:
                del self._claim_index[key]

    def _claim_key(self, claim_id: str) -> bytes:
        """The bucket of a claim id in the claim index: a hash keyed with this engine's own secret."""
        return hashlib.blake2b(claim_id.encode(), key=self._claim_salt, digest_size=16).digest()
