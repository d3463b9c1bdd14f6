"""Retained payloads kept deflated against a dictionary learnt from the first large one.

A slot ad's retained payload is about 4 KB of JSON, and the ads of one machine differ in a few values: the
same attribute names, in the same order, with mostly the same expressions. Deflated alone, one shrinks to
about 1.7 KB; deflated with another slot's ad as zlib's preset dictionary, to about 130 bytes. A daemon of
2048 slots (which keeps every retained payload, to publish it again after a reconnect) and its embedded
broker (which keeps them for the subscribers to come) each hold a few hundred KB instead of 8 MB.

:class:`Packer` takes the first payload of at least :data:`LEARN_FROM` bytes as its dictionary and keeps it
for its lifetime; every later payload of at least :data:`PACK_FROM` bytes is deflated against it. A packed
form starts with one tag byte (:data:`RAW` or :data:`DEFLATED`). Packing is deterministic: one packer turns
equal payloads into equal packed forms, so they can be compared packed.
"""

from __future__ import annotations

import zlib

#: the first payload at least this long becomes the dictionary (a slot ad, not a status word)
LEARN_FROM = 1024
#: payloads shorter than this are kept as they are: deflating them saves nothing
PACK_FROM = 256
#: raw deflate with a 16 KiB window (room for a slot ad and its dictionary) and a small hash table:
#: about 9 us to pack a 4 KB ad and 2.5 us to unpack it, where zlib's defaults take 60 us to pack
WINDOW_BITS = -14
MEM_LEVEL = 5
#: deflate looks back no further than its window: a longer dictionary is cut to its end
DICTIONARY_MAX = 1 << -WINDOW_BITS

RAW = b"\x00"
DEFLATED = b"\x01"
_RAW, _DEFLATED = RAW[0], DEFLATED[0]


class Packer:
    """Packs and unpacks payloads against one dictionary (see the module docstring)."""

    __slots__ = ("_zdict",)

    def __init__(self, dictionary: bytes | None = None) -> None:
        self._zdict: bytes | None = dictionary[-DICTIONARY_MAX:] if dictionary else None

    @property
    def dictionary(self) -> bytes | None:
        """The dictionary learnt (None until a payload of :data:`LEARN_FROM` bytes was packed)."""
        return self._zdict

    def pack(self, payload: bytes | bytearray | memoryview) -> bytes:
        """The packed form of ``payload``."""
        raw = bytes(payload)
        if len(raw) < PACK_FROM or (self._zdict is None and len(raw) < LEARN_FROM):
            return RAW + raw
        if self._zdict is None:
            self._zdict = raw[-DICTIONARY_MAX:]
        deflate = zlib.compressobj(1, zlib.DEFLATED, WINDOW_BITS, MEM_LEVEL, zlib.Z_DEFAULT_STRATEGY, self._zdict)
        return DEFLATED + deflate.compress(raw) + deflate.flush()

    def unpack(self, packed: bytes) -> bytes:
        """The payload ``packed`` was made from (by this packer)."""
        tag = packed[0]
        if tag == _RAW:
            return packed[1:]
        if tag != _DEFLATED or self._zdict is None:
            raise ValueError("not a payload packed by this packer")
        inflate = zlib.decompressobj(WINDOW_BITS, self._zdict)
        payload = inflate.decompress(memoryview(packed)[1:])
        if not inflate.eof:
            raise zlib.error("a packed payload cut short")
        return payload
