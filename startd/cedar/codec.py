"""CEDAR's stream encoding of values inside one message (condor_io/stream.cpp).

- Every integer travels as 8 bytes, big-endian, whatever its C type (``Stream::put(long long)``); a
  C ``int`` read from it keeps its low 32 bits (``Stream::get(int&)``: ``i = (int) ll``).
- A double is two such integers, the fraction scaled by 2^31-1 and the exponent of ``frexp``.
- A string is its bytes and a NUL in the clear; once the stream is encrypted, an integer giving its
  length (the NUL counted) comes first (``Stream::put(char const*)``, ``get_string_ptr``). A string
  whose first byte is 0xFF stands for a NULL pointer.

Reading never trusts a length: every one is checked against what is left of the message.
"""

from __future__ import annotations

import math
import struct

from .framing import CedarError

__all__ = ["Encoder", "Decoder", "FRAC_CONST"]

#: stream.cpp's FRAC_CONST
FRAC_CONST = 2147483647
_LONG = struct.Struct(">q")


def _int32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


class Encoder:
    """Values appended to one outgoing message."""

    def __init__(self, encrypted: bool) -> None:
        self.encrypted = encrypted
        self._parts: list[bytes] = []

    def put_int(self, value: int) -> "Encoder":
        """An integer (8 bytes, big-endian, two's complement)."""
        if not -(1 << 63) <= value < (1 << 63):
            raise ValueError(f"integer {value} does not fit in 64 bits")
        self._parts.append(_LONG.pack(value))
        return self

    def put_bool(self, value: bool) -> "Encoder":
        """A C++ bool (``Stream::code(bool&)`` sends it as an int)."""
        return self.put_int(1 if value else 0)

    def put_double(self, value: float) -> "Encoder":
        """``Stream::put(double)``: the frexp fraction scaled by FRAC_CONST, then the exponent."""
        frac, exp = math.frexp(value)
        return self.put_int(_int32(int(frac * FRAC_CONST))).put_int(exp)

    def put_string(self, text: str | bytes) -> "Encoder":
        """A C string: its bytes and a NUL, after its length when the stream is encrypted."""
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        if b"\x00" in data:
            # a C string would end at the NUL and the peer would read the rest as the next value
            raise ValueError("a string sent on a CEDAR stream cannot hold a NUL byte")
        if self.encrypted:
            self.put_int(len(data) + 1)
        self._parts.append(data + b"\x00")
        return self

    def put_bytes(self, data: bytes) -> "Encoder":
        """Raw bytes (``put_bytes``): the length travels separately, as the protocol says."""
        self._parts.append(bytes(data))
        return self

    def extend(self, other: "Encoder") -> "Encoder":
        """Append what ``other`` holds."""
        self._parts.extend(other._parts)
        return self

    def getvalue(self) -> bytes:
        """The message so far."""
        return b"".join(self._parts)

    def __len__(self) -> int:
        return sum(len(p) for p in self._parts)


class Decoder:
    """Values read from one incoming message, in order. Every method raises :class:`CedarError` when
    the message holds less than it should."""

    def __init__(self, data: bytes, encrypted: bool) -> None:
        self._data = memoryview(data)
        self._pos = 0
        self.encrypted = encrypted

    @property
    def remaining(self) -> int:
        """Bytes not read yet."""
        return len(self._data) - self._pos

    def at_end(self) -> bool:
        """Whether the whole message was read (``end_of_message`` in decode mode wants that)."""
        return self._pos == len(self._data)

    def _take(self, n: int, what: str) -> bytes:
        if n < 0 or self._pos + n > len(self._data):
            raise CedarError(f"the message ended before {what}")
        out = bytes(self._data[self._pos:self._pos + n])
        self._pos += n
        return out

    def get_long(self, what: str = "an integer") -> int:
        """An integer as sent (64 bits, signed)."""
        value: int = _LONG.unpack(self._take(8, what))[0]
        return value

    def get_int(self, what: str = "an integer") -> int:
        """An integer read into a C ``int``: its low 32 bits, signed."""
        return _int32(self.get_long(what))

    def get_double(self, what: str = "a number") -> float:
        """``Stream::get(double)``."""
        frac = self.get_int(what)
        exp = self.get_int(what)
        try:
            return math.ldexp(frac / FRAC_CONST, exp)
        except OverflowError:
            raise CedarError(f"{what} out of range") from None

    def get_bytes(self, n: int, what: str = "bytes") -> bytes:
        """``n`` raw bytes."""
        return self._take(n, what)

    def get_raw_string(self, what: str = "a string", limit: int | None = None) -> bytes | None:
        """A C string's bytes (None for the NULL marker). ``limit`` bounds its length."""
        if self.encrypted:
            length = self.get_int(what)
            # get_string_ptr refuses lengths outside 0..10,000,000; the message bound is tighter still
            if length < 0 or length > self.remaining:
                raise CedarError(f"{what} with an impossible length ({length})")
            raw = self._take(length, what)
            if raw[:1] == b"\xff":
                return None
            nul = raw.find(b"\x00")
            text = raw if nul < 0 else raw[:nul]
        else:
            if self.remaining < 1:
                raise CedarError(f"the message ended before {what}")
            if self._data[self._pos] == 0xFF:
                self._pos += 1
                return None
            rest = self._data[self._pos:]
            nul = bytes(rest).find(b"\x00") if len(rest) < 4096 else _find_nul(rest)
            if nul < 0:
                raise CedarError(f"{what} without its terminating NUL")
            text = bytes(rest[:nul])
            self._pos += nul + 1
        if limit is not None and len(text) > limit:
            raise CedarError(f"{what} longer than {limit} bytes")
        return text

    def get_string(self, what: str = "a string", limit: int | None = None) -> str:
        """A C string as text (UTF-8); the NULL marker reads as an empty string."""
        raw = self.get_raw_string(what, limit)
        if raw is None:
            return ""
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise CedarError(f"{what} that is not UTF-8 text") from None


def _find_nul(view: memoryview) -> int:
    """The index of the first NUL in ``view``, looking at it in pieces (a long message is not copied whole)."""
    step = 65536
    for start in range(0, len(view), step):
        found = bytes(view[start:start + step]).find(b"\x00")
        if found >= 0:
            return start + found
    return -1
