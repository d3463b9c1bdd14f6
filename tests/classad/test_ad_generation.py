"""An ad's generation counts its changes, so anything derived from it (its JSON, its published text) can be
cached on (ad, generation) and rebuilt only when the ad really changed."""

from startd.classad import ClassAd, Expr


def test_storing_an_equal_value_is_not_a_change():
    ad = ClassAd({"Cpus": 4, "State": "Unclaimed"})
    g = ad.generation
    ad["Cpus"] = 4
    ad["State"] = "Unclaimed"
    assert ad.generation == g


def test_a_different_value_type_or_spelling_is_a_change():
    ad = ClassAd({"Cpus": 4})
    seen = [ad.generation]
    for step in (lambda: ad.__setitem__("Cpus", 5),      # value
                 lambda: ad.__setitem__("Cpus", 5.0),    # type: 5 and 5.0 are different literals
                 lambda: ad.__setitem__("CPUS", 5.0),    # spelling (a JSON key or a printed name changes)
                 lambda: ad.__setitem__("Start", Expr("Cpus > 1")),
                 lambda: ad.__delitem__("Start"),
                 lambda: ad.update(ClassAd({"Memory": 1024}))):
        step()
        assert ad.generation > seen[-1]
        seen.append(ad.generation)


def test_a_copy_changes_on_its_own():
    ad = ClassAd({"Cpus": 4})
    cp = ad.copy()
    g = ad.generation
    cp["Cpus"] = 8
    assert ad.generation == g and ad["Cpus"] == Expr("4")


def test_equal_small_values_and_names_are_shared_between_ads_but_stay_independent():
    # thousands of slot ads hold the same names and small values: their nodes are shared (memory per slot),
    # and changing one ad never shows in another
    a, b = ClassAd(), ClassAd()
    for ad in (a, b):
        ad["State"] = "Unclaimed"
        ad["Cpus"] = 1
        ad["StartJobs"] = True
    assert a.get_node("State") is b.get_node("State") and a.get_node("Cpus") is b.get_node("Cpus")
    a["State"] = "Claimed"
    a["Cpus"] = 2
    assert b["State"] == Expr('"Unclaimed"') and b["Cpus"] == Expr("1") and a["Cpus"] == Expr("2")
    assert a.get_node("StartJobs").value is True and ClassAd({"X": 1})["X"] != Expr("true")  # 1 is not true


def test_the_expression_generation_moves_only_when_an_expression_comes_or_goes():
    """What the ad's expressions refer to can be cached on (ad, expr_generation): constants replacing
    constants (a figure refreshed at every poll) do not move it; an expression set, replaced or removed does."""
    ad = ClassAd({"Cpus": 4, "KeyboardIdle": 10})
    g = ad.expr_generation
    ad["KeyboardIdle"] = 15
    ad["LoadAvg"] = 0.5
    del ad["LoadAvg"]
    assert ad.expr_generation == g
    seen = [g]
    for step in (lambda: ad.__setitem__("Start", Expr("KeyboardIdle > 60")),  # an expression arrives
                 lambda: ad.__setitem__("Start", True),                        # ... is replaced by a constant
                 lambda: ad.__setitem__("Start", Expr("Cpus > 1")),
                 lambda: ad.__delitem__("Start"),                              # ... is removed
                 lambda: ad.update(ClassAd({"Memory": 1024}))):
        step()
        assert ad.expr_generation > seen[-1]
        seen.append(ad.expr_generation)
