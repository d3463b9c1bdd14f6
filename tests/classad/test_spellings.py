"""Attribute names are case-insensitive and case-preserving (the ClassAd language: "attribute names are
case-insensitive ... the case used when the attribute was defined is kept"). Each ad keeps the spelling it
was given; the spellings most ads share are kept once for all of them, so a table of a hundred names is
not repeated in every slot ad."""

from __future__ import annotations

import random

from startd.classad import ClassAd, parse_ad, parse_ads, parse_expr
from startd.classad.jsonform import ad_to_obj


def _names(ad: ClassAd) -> list[str]:
    return list(ad)


def test_each_ad_keeps_the_spelling_it_was_given_whatever_others_use() -> None:
    a, b, c = ClassAd(), ClassAd(), ClassAd()
    a["SpellTestAlpha"] = 1
    b["spelltestalpha"] = 2
    c["SPELLTESTALPHA"] = parse_expr("1 + 1")
    assert (_names(a), _names(b), _names(c)) == (["SpellTestAlpha"], ["spelltestalpha"], ["SPELLTESTALPHA"])
    assert "spelltestalpha = 2" in b.to_old() and "SPELLTESTALPHA = 1 + 1" in c.to_old()
    assert ad_to_obj(b) == {"spelltestalpha": 2}


def test_a_new_spelling_of_an_attribute_replaces_the_old_one_in_that_ad_only() -> None:
    a, b = ClassAd({"SpellTestBeta": 1}), ClassAd({"SpellTestBeta": 1})
    a["SPELLTESTBETA"] = 1  # the same value under another spelling: the spelling changes
    assert _names(a) == ["SPELLTESTBETA"] and _names(b) == ["SpellTestBeta"]
    a["SpellTestBeta"] = 1  # and back to the shared one
    assert _names(a) == ["SpellTestBeta"] and a.name_of("spelltestbeta") == "SpellTestBeta"
    assert a.name_of("NotThere") == "NotThere"


def test_copies_updates_and_deletions_keep_each_spelling() -> None:
    a = parse_ad("[ SpellTestGamma = 1; spelltestdelta = 2 ]")
    b = parse_ad("spelltestgamma = 3\nSpellTestDelta = 4")
    copy = a.copy()
    copy.update(b)
    assert _names(copy) == ["spelltestgamma", "SpellTestDelta"] and copy["SpellTestGamma"].evaluate() == 3
    assert _names(a) == ["SpellTestGamma", "spelltestdelta"]
    del copy["SPELLTESTGAMMA"]
    copy["SpellTestGamma"] = 5
    assert _names(copy) == ["SpellTestDelta", "SpellTestGamma"]


def test_an_ad_of_shared_spellings_keeps_no_table_of_its_own() -> None:
    text = "\n".join(f"SpellShared{i} = {i}" for i in range(150))
    first, *others = parse_ads("\n\n".join([text] * 20))
    assert all(len(ad._names) == 0 for ad in others)
    slot = ClassAd()
    for i in range(150):
        slot[f"SpellShared{i}"] = i * 2
    assert len(slot._names) == 0 and _names(slot) == _names(first)


def test_random_spellings_read_back_as_set() -> None:
    rng = random.Random(11)
    base = [f"SpellRand{i}" for i in range(30)]
    for _ in range(200):
        ad, expected = ClassAd(), {}
        for _ in range(40):
            name = "".join(ch.upper() if rng.random() < 0.3 else ch.lower() for ch in rng.choice(base))
            if rng.random() < 0.15 and expected:
                gone = rng.choice(list(expected))
                del ad[gone]
                del expected[gone.lower()]
                continue
            ad[name] = rng.randrange(3)
            expected[name.lower()] = name  # the latest spelling wins, in the place of the first
        assert _names(ad) == list(expected.values())
        table = ad.spelling_table()
        assert all(table[name.lower()] == name for name in expected.values())
        assert list(ad_to_obj(ad)) == list(expected.values())
