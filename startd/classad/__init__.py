"""The ClassAd language: parsing, evaluation, matching, unparsing and HTCondor's JSON form.

>>> from startd.classad import parse_ad, parse_expr
>>> machine = parse_ad('[ Memory = 2048; Requirements = TARGET.RequestMemory <= Memory ]')
>>> job = parse_ad('RequestMemory = 1024\\nRequirements = TARGET.Memory >= 1024\\n')
>>> parse_expr('Memory * 2').evaluate(machine)
4096
>>> ClassAd.symmetric_match(machine, job)
True

Expressions from the network are evaluated under a bound: ``with evaluation_budget(0.05): ...``
(:mod:`startd.classad.limits`).
"""

# The evaluator and the unparser install themselves into the modules below them (the tree and the
# ad) when they are imported; importing both here makes every method of Expr and ClassAd work.
from . import evaluate as _evaluate  # noqa: F401
from .ad import ClassAd, Expr, parse_ad, parse_ads, parse_expr, value_to_node
from .jsonform import from_json, to_json
from .limits import EvaluationBudget, evaluation_budget
from .parser import ClassAdSyntaxError
from .unparse import format_value, unparse
from .values import ERROR, UNDEFINED, AbsTime, RelTime

__all__ = [
    "ClassAd",
    "Expr",
    "parse_ad",
    "parse_ads",
    "parse_expr",
    "unparse",
    "format_value",
    "to_json",
    "from_json",
    "value_to_node",
    "ClassAdSyntaxError",
    "evaluation_budget",
    "EvaluationBudget",
    "UNDEFINED",
    "ERROR",
    "AbsTime",
    "RelTime",
]
