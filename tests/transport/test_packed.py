"""Retained payloads kept packed against a dictionary learnt from the first large one (startd.transport.packed):
in the daemon's connection, its ad cache and the embedded broker's retained store."""

from __future__ import annotations

import json
import random
import zlib

import pytest

from startd.classad import parse_ad, to_json
from startd.transport.adjson import AdJsonCache
from startd.transport.packed import DEFLATED, LEARN_FROM, PACK_FROM, RAW, Packer

from test_adjson import SLOT_TEXT, fresh_payload


def _slot_payload(i: int) -> bytes:
    ad = parse_ad(SLOT_TEXT.replace("slot1@m", f"slot{i}@m"))
    ad["Memory"] = 1000 + i
    ad["Padding"] = "x" * 900  # past LEARN_FROM, as a real slot ad (4 KB) is
    return to_json(ad).encode()


def test_every_payload_comes_back_unchanged() -> None:
    rng = random.Random(3)
    packer = Packer()
    payloads = [b"", b"online", bytes(rng.randrange(256) for _ in range(PACK_FROM)),
                *(_slot_payload(i) for i in range(1, 20)),
                bytes(rng.randrange(256) for _ in range(70000)), "Ünïcode ✓".encode() * 100]
    packed = [packer.pack(p) for p in payloads]
    assert [packer.unpack(p) for p in packed] == payloads


def test_the_first_large_payload_becomes_the_dictionary_and_shrinks_the_others() -> None:
    packer = Packer()
    assert packer.pack(b"x" * (LEARN_FROM - 1)).startswith(RAW) and packer.dictionary is None
    first = _slot_payload(1)
    packer.pack(first)
    assert packer.dictionary == first
    other = _slot_payload(2)
    packed = packer.pack(other)
    assert packed.startswith(DEFLATED) and len(packed) < len(other) // 8


def test_short_payloads_are_kept_as_they_are() -> None:
    packer = Packer(_slot_payload(1))
    assert packer.pack(b"offline") == RAW + b"offline"


def test_equal_payloads_pack_alike_so_they_compare_packed() -> None:
    packer = Packer()
    a, b = _slot_payload(5), _slot_payload(6)
    assert packer.pack(a) == packer.pack(bytes(a)) != packer.pack(b)


def test_a_form_this_packer_did_not_make_is_refused() -> None:
    with pytest.raises(ValueError, match="not a payload packed by this packer"):
        Packer().unpack(b"\x07abc")
    with pytest.raises(ValueError, match="not a payload packed by this packer"):
        Packer().unpack(DEFLATED + b"\x00\x01")  # deflated, but no dictionary was learnt
    with pytest.raises(zlib.error):
        Packer(_slot_payload(1)).unpack(DEFLATED + b"\x00\x01")


def test_the_ad_cache_keeps_the_payload_packed_and_answers_it_whole() -> None:
    cache = AdJsonCache()
    ads = [parse_ad(SLOT_TEXT.replace("slot1@m", f"slot{i}@m")) for i in range(1, 4)]
    for i, ad in enumerate(ads, 1):
        ad["Padding"] = "y" * 900
        packed = cache.packed(f"slot{i}", ad)
        assert cache.packer.unpack(packed) == cache.payload(f"slot{i}", ad) == fresh_payload(ad)
        assert json.loads(cache.reply_member(f"slot{i}", ad))["Name"] == f"slot{i}@m"
    assert len(cache.packed("slot3", ads[2])) < 400


def test_a_packed_payload_cut_short_is_refused() -> None:
    packer = Packer(_slot_payload(1))
    packed = packer.pack(_slot_payload(2))
    with pytest.raises(zlib.error):
        packer.unpack(packed[:-4])
