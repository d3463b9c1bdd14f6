"""A query for ads, as the startd answers QUERY_STARTD_ADS and QUERY_MULTIPLE_ADS
(``command_query_ads``, condor_startd.V6/command.cpp, and ``ResMgr::makeAdList``).

The query ad's ``Requirements`` is the constraint: an ad is sent when it is true with the query as MY
and the ad as TARGET (``IsAConstraintMatch``: ``rightMatchesLeft``, names the query does not define
looked up in the ad). ``LimitResults`` caps the number of ads, ``Projection`` (names separated by
spaces or commas) the attributes. QUERY_STARTD_ADS asks for slot ads; QUERY_MULTIPLE_ADS for the
types its ``TargetType`` lists (``Machine`` for slots, ``StartD`` for the daemon ad; condor_adtypes.h), the
daemon ad alone when it lists none. The reply is one message: for each ad, the integer 1 and the ad
without its private attributes; then 0.

The owner of the ads (the daemon) walks its ads in slices and hands each to :meth:`AdQuery.offer`,
which decides and encodes it at once, so no ad is held across a pause.
"""

from __future__ import annotations

import re
import time

from ..classad import ClassAd, Expr, evaluation_budget
from .classad_wire import put_classad
from .codec import Encoder

__all__ = ["AdQuery", "QUERY_BUDGET_SECONDS", "QUERY_STARTD_ADS", "QUERY_MULTIPLE_ADS"]

QUERY_STARTD_ADS = 5
QUERY_MULTIPLE_ADS = 53
#: Seconds of constraint evaluation one query may spend over all the ads (as a query over MQTT)
QUERY_BUDGET_SECONDS = 0.25
_SEPARATORS = re.compile(r"[\s,]+")
_SLOT_TYPES = {"machine"}
_DAEMON_TYPES = {"startd"}


def _value(ad: ClassAd, name: str) -> object:
    expr = ad.lookup(name)
    return expr.evaluate(ad) if expr is not None else None


class AdQuery:
    """One query: which ads it wants, and its reply as it is built."""

    def __init__(self, command: int, query: ClassAd, *, encrypted: bool, now: float | None = None) -> None:
        self.query = query
        self.now = time.time() if now is None else now
        targets_value = _value(query, "TargetType")
        targets = {t.lower() for t in _SEPARATORS.split(targets_value) if t} if isinstance(targets_value, str) else set()
        if command == QUERY_STARTD_ADS:
            self.wants_slots, self.wants_daemon = True, False
        elif not targets:
            # makeAdList: QUERY_MULTIPLE without a TargetType gets the daemon ad
            self.wants_slots, self.wants_daemon = False, True
        else:
            self.wants_slots = bool(targets & _SLOT_TYPES)
            self.wants_daemon = bool(targets & _DAEMON_TYPES)
        limit = _value(query, "LimitResults")
        self.limit = limit if isinstance(limit, int) and not isinstance(limit, bool) else -1
        projection = _value(query, "Projection")
        names = [p for p in _SEPARATORS.split(projection) if p] if isinstance(projection, str) else []
        self.projection: list[str] | None = names or None
        self.requirements: Expr | None = query.lookup("Requirements")
        self.count = 0
        self._spent = 0.0
        self._reply = Encoder(encrypted)

    @property
    def full(self) -> bool:
        """Whether LimitResults is reached (nothing more is taken)."""
        return 0 <= self.limit <= self.count

    def matches(self, ad: ClassAd) -> bool:
        """Whether ``ad`` satisfies the query's Requirements (within the query's evaluation budget;
        past it, nothing more matches)."""
        if self.requirements is None:
            return True
        left = QUERY_BUDGET_SECONDS - self._spent
        if left <= 0:
            return False
        start = time.perf_counter()
        with evaluation_budget(left):
            result = self.query.evaluate("Requirements", target=ad, now=self.now) is True
        self._spent += time.perf_counter() - start
        return result

    def offer(self, ad: ClassAd) -> bool:
        """Consider one ad: encoded into the reply at once when it matches. False once the limit is
        reached (the caller may stop)."""
        if self.full:
            return False
        if self.matches(ad):
            self._reply.put_int(1)
            put_classad(self._reply, ad, projection=self.projection)
            self.count += 1
        return not self.full

    def reply(self) -> bytes:
        """The whole reply message: the ads taken, then 0."""
        self._reply.put_int(0)
        return self._reply.getvalue()
