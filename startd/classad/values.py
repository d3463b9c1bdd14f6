"""ClassAd values.

Values are plain Python objects: ``bool``, ``int``, ``float``, ``str``, ``list`` (of values),
:class:`~startd.classad.ad.ClassAd` (a record, told by :func:`~startd.classad.ad.is_classad`),
:class:`AbsTime`, :class:`RelTime`, and the two singletons :data:`UNDEFINED` and :data:`ERROR`.

``bool`` is a subclass of ``int`` in Python, so every type test in the language must look for
``bool`` first: in ClassAds ``true`` is a boolean, never the integer 1.
"""

from __future__ import annotations

import math
from typing import Final


class _Undefined:
    """The ``undefined`` value: a reference to something that does not exist."""

    __slots__ = ()
    _instance: "_Undefined | None" = None

    def __new__(cls) -> "_Undefined":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNDEFINED"

    def __str__(self) -> str:
        return "undefined"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "UNDEFINED"


class _Error:
    """The ``error`` value: the result of a type mismatch or an impossible operation."""

    __slots__ = ()
    _instance: "_Error | None" = None

    def __new__(cls) -> "_Error":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ERROR"

    def __str__(self) -> str:
        return "error"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "ERROR"


UNDEFINED: Final = _Undefined()
ERROR: Final = _Error()


class AbsTime:
    """An absolute time: seconds since the epoch plus the time-zone offset it is shown in.

    Two absolute times are equal when they denote the same instant, whatever their offsets.
    """

    __slots__ = ("secs", "offset")

    def __init__(self, secs: float, offset: int = 0) -> None:
        self.secs = secs
        self.offset = int(offset)

    def __float__(self) -> float:
        return float(self.secs)

    def __int__(self) -> int:
        return int(self.secs)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AbsTime) and self.secs == other.secs

    def __hash__(self) -> int:
        return hash(("AbsTime", self.secs))

    def __repr__(self) -> str:
        return f"AbsTime({self.secs!r}, offset={self.offset})"


class RelTime:
    """A relative time (an interval) in seconds."""

    __slots__ = ("secs",)

    def __init__(self, secs: float) -> None:
        self.secs = secs

    def __float__(self) -> float:
        return float(self.secs)

    def __int__(self) -> int:
        return int(self.secs)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RelTime) and self.secs == other.secs

    def __hash__(self) -> int:
        return hash(("RelTime", self.secs))

    def __repr__(self) -> str:
        return f"RelTime({self.secs!r})"


INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1


def wrap_int(i: int) -> int:
    """Wrap an integer to 64-bit two's complement, as HTCondor's ``long long`` arithmetic does."""
    if INT64_MIN <= i <= INT64_MAX:
        return i
    return ((i + 2**63) % 2**64) - 2**63


def real_to_int(f: float) -> int:
    """Truncate a real towards zero the way a C cast to a 64-bit integer does on x86-64.

    Values that do not fit (and NaN) become the "integer indefinite" value INT64_MIN.
    """
    if math.isnan(f) or math.isinf(f):
        return INT64_MIN
    i = int(f)
    if i < INT64_MIN or i > INT64_MAX:
        return INT64_MIN
    return i
