"""The evaluation shortcuts of the policy pass give what a fresh evaluation gives."""

from __future__ import annotations

import random

from startd.classad import ClassAd
from startd.classad.evaluate import evaluate_node
from startd.classad.parser import parse_node
from startd.engine.claim import Claim
from startd.engine.resource import eval_node


def test_universe_follows_changes_to_the_job_ad() -> None:
    rng = random.Random(7)
    job = ClassAd({"JobUniverse": 5, "Owner": "alice"})
    c = Claim(id="c1", job=job)
    for _ in range(300):
        r = rng.random()
        if r < 0.3:
            job["JobUniverse"] = rng.choice([5, 7, 9, True, "x", 5.0])
        elif r < 0.4:
            job.set_expr("JobUniverse", rng.choice(["2 + 3", "Owner == \"alice\"", "undefined"]))
        elif r < 0.5 and "JobUniverse" in job:
            del job["JobUniverse"]
        elif r < 0.6:
            c.job = job = ClassAd({"JobUniverse": rng.choice([5, 7])})
        elif r < 0.7:
            job["Owner"] = rng.choice(["alice", "bob"])
        v = job.evaluate("JobUniverse")
        want = v if isinstance(v, int) and not isinstance(v, bool) else None
        assert c.universe == want
        assert c.universe == want  # and again, from what it remembered


def test_eval_node_is_evaluate_node() -> None:
    ad = ClassAd({"A": 3, "B": "x"})
    job = ClassAd({"C": 4})
    for text in ("600", "0", "-1", "true", "\"s\"", "1.5", "undefined", "error", "A + TARGET.C", "B", "time() - 5",
                 "{1, 2}", "[a = 1]"):
        node = parse_node(text)
        for now in (0.0, 100.0, 12345.5):
            a, b = eval_node(node, ad, job, now), evaluate_node(node, ad, job, now)
            assert type(a) is type(b) and repr(a) == repr(b)
