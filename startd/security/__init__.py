"""Security: the pool signing key, IDTOKENS, signed commands and HTCondor's authorization.

* :mod:`.keys` - the POOL signing key file as HTCondor writes and reads it.
* :mod:`.tokens` - minting, checking and finding IDTOKENS.
* :mod:`.wire` - commands that carry a proof of their token, and sealed replies.
* :mod:`.authz` - authorization levels, ALLOW/DENY lists and authentication requirements.

This package stands alone: it reads configuration through anything with ``get(name)`` and knows
nothing of the transport or the daemon.
"""

from __future__ import annotations

from .authz import AuthorizationTable, Level, Requirement, implied
from .keys import SigningKeyError, ensure_signing_key, find_signing_key, load_signing_key, signing_key_candidates, \
    signing_key_path
from .tokens import TokenClaims, TokenError, client_tokens, decode_unverified, mint, pick_token, split_token, \
    token_files, verify_token, verify_unsigned
from .wire import UNAUTHENTICATED, AuthError, CommandVerifier, Identity, reply_key_for, seal, sign_command, unseal

__all__ = [
    "AuthorizationTable", "Level", "Requirement", "implied",
    "SigningKeyError", "ensure_signing_key", "find_signing_key", "load_signing_key", "signing_key_candidates",
    "signing_key_path",
    "TokenClaims", "TokenError", "client_tokens", "decode_unverified", "mint", "pick_token", "split_token",
    "token_files", "verify_token", "verify_unsigned",
    "UNAUTHENTICATED", "AuthError", "CommandVerifier", "Identity", "reply_key_for", "seal", "sign_command", "unseal",
]
