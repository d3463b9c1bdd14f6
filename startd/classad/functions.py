"""The built-in function library of the ClassAd language, as HTCondor 25 defines it.

:data:`FUNCTIONS` maps each lower-case function name to ``f(state, args) -> value``, where ``args``
are the unevaluated argument nodes: every function decides itself what to evaluate, so the lazy
ones (``ifThenElse``, ``isUndefined``..., ``evalInEachContext``, ``countMatches``, ``unparse``) need
nothing special. A wrong number of arguments gives ``error``; evaluation never raises.

Every function below behaves as HTCondor's own ClassAd library (with the functions the HTCondor
daemons add to it) does, edge cases included, as measured against that library. Strings are byte
strings there, so sizes and offsets count UTF-8 bytes and case mapping touches ASCII letters only.

Implemented (HTCondor's names):

- type predicates: ``isUndefined isError isString isInteger isReal isBoolean isList isClassAd
  isAbstime isReltime``
- control and reflection: ``ifThenElse eval unparse debug``
- conversions: ``int real string bool absTime relTime``
- arithmetic: ``floor ceil ceiling round pow quantize random``
- lists: ``member identicalMember size sum avg min max anyCompare allCompare``
- nested ads: ``evalInEachContext countMatches``
- strings: ``strcat join substr strcmp stricmp toUpper toLower split splitUserName splitSlotName
  versioncmp versionGT versionLT versionGE versionLE versionEQ version_in_range``
- string lists: ``stringListSize stringListSum stringListAvg stringListMin stringListMax
  stringListMember stringListIMember stringListSubsetMatch stringListISubsetMatch
  stringListsIntersect stringList_regexpMember``
- regular expressions: ``regexp regexpMember regexps replace replaceAll``
- time: ``time currentTime timeZoneOffset dayTime getYear getMonth getDayOfYear getDayOfMonth
  getDayOfWeek getDays getHours getMinutes getSeconds splitTime formatTime interval``
- users: ``userHome`` (the machine's password database, as the startd's host sees it)
- job arguments and environments: ``argsToList listToArgs envV1ToV2 mergeEnvironment``

Left out, on purpose:

- ``userMap``: maps names through the daemon's configured map files
  (``CLASSAD_USER_MAPFILE_*``); there is no such map here. Calling it gives ``error`` (unknown
  function).
- ``unresolved``: reports the external references of an expression, which needs the
  evaluator's reference analysis rather than a value; no policy expression of a startd uses it.
- ``inDays inHours inMinutes inSeconds makeDate sprintf``: HTCondor does not register them (the
  first five are compiled out of its library; it has no printf-like function besides
  ``formatTime``), so they are unknown functions there too.

Where HTCondor's own library fails the whole evaluation (``random(0)``, ``random(-1)``,
``userHome()`` with a wrong argument count), the result here is ``error``. ``absTime("...")`` and
``relTime("...")`` with a literal string are read by the parser, as HTCondor does; at run time
``absTime`` returns a computed string unchanged and ``relTime`` gives ``relTime(0)``, as HTCondor's
library does. ``unparse`` writes HTCondor's pretty-printed text
(:mod:`startd.classad.unparse_htcondor`).

Every function in :data:`FUNCTIONS` is total: an unexpected Python exception inside one gives
``error``.

Differences in regular expressions: HTCondor uses PCRE2 on bytes, without UTF mode. Patterns
here are judged valid by Python's ``re`` and run by the ``regex`` module (same syntax, and a time
limit on each match: :mod:`startd.classad.functions_regex`) on the UTF-8 bytes, which agrees
for the usual syntax (classes, ``\\d \\w \\s``, anchors, ``\\A \\z \\Z``, lazy/possessive
quantifiers, atomic groups, named groups ``(?<n>...)``/``\\k<n>``, POSIX classes ``[[:alpha:]]``,
inline ``(?i)``, ``\\Q..\\E``, ``\\x{..}``, ``\\h``, ``\\R``). PCRE features with no ``re``
counterpart (``\\p{..}`` Unicode properties, recursion, ``\\K``, branch reset, conditionals,
backtracking verbs) and a back-reference to a group that is still open (which PCRE lets fail to
match) give ``error`` as an invalid pattern would, and so does a match that runs out of time (as
PCRE's match limit does in HTCondor) or a pattern too large to compile safely. Option letters:
``i m s x`` (and ``f``/``g`` for the substitutions) in lower case only for
``regexp``/``regexpMember``/``regexps``/``replace*``; either case for ``stringList_regexpMember``,
as in HTCondor.
"""

from __future__ import annotations

import math
import random as _random
from typing import Any, Callable, Sequence

from .functions_common import (
    ERROR, UNDEFINED, AbsTime, RelTime, real_to_int, to_int, to_real, to_string, wrap_int,
)
from .ad import is_classad
from .ast import AttrRef
from .limits import MAX_STRING_LENGTH, BudgetExhausted, charge_size
from .unparse_htcondor import unparse_htcondor

Value = Any
FunctionType = Callable[[Any, Sequence[Any]], Value]


# --------------------------------------------------------------------------------------------
# Type predicates
# --------------------------------------------------------------------------------------------

def _predicate(test: Callable[[Value], bool]) -> FunctionType:
    def fn(st: Any, args: Sequence[Any]) -> Value:
        if len(args) != 1:
            return ERROR
        return test(args[0].ev(st))
    return fn


def _is_int(v: Value) -> bool:
    return type(v) is int


def _is_real(v: Value) -> bool:
    return type(v) is float


def _is_bool(v: Value) -> bool:
    return type(v) is bool


def _is_str(v: Value) -> bool:
    return type(v) is str


def _is_list(v: Value) -> bool:
    return type(v) is list


def _is_abstime(v: Value) -> bool:
    return type(v) is AbsTime


def _is_reltime(v: Value) -> bool:
    return type(v) is RelTime


# --------------------------------------------------------------------------------------------
# Control and reflection
# --------------------------------------------------------------------------------------------

def fn_ifthenelse(st: Any, args: Sequence[Any]) -> Value:
    """``ifThenElse(c, a, b)``: lazy; numbers count as booleans, other types are an error."""
    if len(args) != 3:
        return ERROR
    c = args[0].ev(st)
    t = type(c)
    if t is bool or t is int or t is float:
        return args[1].ev(st) if c else args[2].ev(st)
    if c is UNDEFINED:
        return UNDEFINED
    return ERROR


def fn_eval(st: Any, args: Sequence[Any]) -> Value:
    """``eval(s)``: parse the string form of ``s`` and evaluate it in the current scope."""
    if len(args) != 1:
        return ERROR
    s = to_string(args[0].ev(st))
    if type(s) is not str:
        return ERROR
    return st.eval_text(s)


def _is_attr_ref(node: Any) -> bool:
    """True when an argument node is an attribute reference."""
    return isinstance(node, AttrRef)


def fn_unparse(st: Any, args: Sequence[Any]) -> Value:
    """``unparse(attr)``: the text of the expression an attribute holds, "" when it has none.

    As in HTCondor, only a plain name is looked up (``unparse(MY.x)`` names nothing).
    """
    if len(args) != 1 or not _is_attr_ref(args[0]):
        return ERROR
    ref = args[0]
    if ref.base is not None or ref.absolute:
        return ""
    # HTCondor looks the name up in the current ad only (no enclosing ad, no TARGET).
    scope = getattr(st, "scope", None)
    if not is_classad(scope) or ref.name not in scope:
        return ""
    expr = scope[ref.name]
    # Nested lists print with ever deeper indentation: bound the text, as every built string is.
    text = unparse_htcondor(getattr(expr, "node", expr), MAX_STRING_LENGTH)
    charge_size(st, len(text))
    return text


def fn_debug(st: Any, args: Sequence[Any]) -> Value:
    """``debug(e)``: the value of ``e`` (HTCondor also logs the evaluation; nothing to log here)."""
    if len(args) != 1:
        return ERROR
    return args[0].ev(st)


# --------------------------------------------------------------------------------------------
# Conversions
# --------------------------------------------------------------------------------------------

def fn_int(st: Any, args: Sequence[Any]) -> Value:
    """``int(v)``."""
    if len(args) != 1:
        return ERROR
    return to_int(args[0].ev(st))


def fn_real(st: Any, args: Sequence[Any]) -> Value:
    """``real(v)``."""
    if len(args) != 1:
        return ERROR
    return to_real(args[0].ev(st))


def fn_string(st: Any, args: Sequence[Any]) -> Value:
    """``string(v)``."""
    if len(args) != 1:
        return ERROR
    return to_string(args[0].ev(st))


def fn_bool(st: Any, args: Sequence[Any]) -> Value:
    """``bool(v)``: numbers by zero-ness, "true"/"false" in any case, other strings undefined."""
    if len(args) != 1:
        return ERROR
    v = args[0].ev(st)
    t = type(v)
    if t is bool:
        return v
    if t is int or t is float:
        return v != 0
    if t is str:
        low = v.lower()
        if low == "true":
            return True
        if low == "false":
            return False
        return UNDEFINED
    if t is RelTime:
        return int(v.secs) != 0
    if v is UNDEFINED:
        return UNDEFINED
    return ERROR


# --------------------------------------------------------------------------------------------
# Arithmetic
# --------------------------------------------------------------------------------------------

def _rounder(op: Callable[[float], float]) -> FunctionType:
    def fn(st: Any, args: Sequence[Any]) -> Value:
        if len(args) != 1:
            return ERROR
        v = args[0].ev(st)
        if type(v) is int:
            return v
        r = to_real(v)
        if type(r) is not float:
            return ERROR
        if r != r or r in (math.inf, -math.inf):
            return real_to_int(r)
        return real_to_int(float(op(r)))
    return fn


def _rint(x: float) -> float:
    """C ``rint`` in the default rounding mode: halves go to the even neighbour."""
    return float(round(x))


def fn_pow(st: Any, args: Sequence[Any]) -> Value:
    """``pow(b, e)``: integer when both are integers and ``e >= 0``, else real."""
    if len(args) != 2:
        return ERROR
    a = args[0].ev(st)
    b = args[1].ev(st)
    if type(a) is int and type(b) is int and b >= 0:
        try:
            f = math.pow(float(a), float(b))
        except OverflowError:
            f = math.inf if (a > 0 or b % 2 == 0) else -math.inf
        # HTCondor rounds the real power by adding one half and truncating.
        return real_to_int(f + 0.5)
    x = to_real(a)
    y = to_real(b)
    if type(x) is not float or type(y) is not float:
        return ERROR
    try:
        return math.pow(x, y)
    except OverflowError:
        return math.inf if (x > 0 or float(y).is_integer() and int(y) % 2 == 0) else -math.inf
    except ValueError:
        if x == 0.0:
            return math.inf
        return math.nan


def fn_quantize(st: Any, args: Sequence[Any]) -> Value:
    """``quantize(a, b)``: the least multiple of ``b`` (or first list entry) not below ``a``."""
    if len(args) != 2:
        return ERROR
    a = args[0].ev(st)
    b = args[1].ev(st)
    ra = to_real(a)
    if type(ra) is not float:
        return ERROR
    if type(b) is list:
        base: Value = 0.0
        for item in b:
            rb = to_real(item)
            if type(rb) is not float:
                return ERROR
            base = item
            if rb >= ra:
                return item
        b = base
    if type(b) is int:
        if b == 0:
            return a
        if type(a) is int:
            # 64-bit C arithmetic: the sum wraps, the division truncates towards zero.
            q = wrap_int(a + b - 1)
            quo = abs(q) // abs(b)
            if (q < 0) != (b < 0):
                quo = -quo
            return wrap_int(quo * b)
        return _ceil_real(ra / b) * b
    rb = to_real(b)
    if type(rb) is not float:
        return ERROR
    if -1e-8 <= rb <= 1e-8:
        return a
    return _ceil_real(ra / rb) * rb


def _ceil_real(x: float) -> float:
    """C ``ceil`` on a double (NaN and infinities pass through)."""
    if not math.isfinite(x):
        return x
    # C ceil keeps the sign of a result of zero (ceil(-0.5) is -0.0).
    return math.copysign(float(math.ceil(x)), x)


_rng = _random.Random()


def fn_random(st: Any, args: Sequence[Any]) -> Value:
    """``random([x])``: an integer in ``[0, x)`` for an integer, a real for a real (default 1.0)."""
    if len(args) > 1:
        return ERROR
    v = args[0].ev(st) if args else 1.0
    t = type(v)
    if t is int:
        if v == 0:
            return ERROR
        # HTCondor takes a non-negative random integer modulo x (C remainder semantics).
        r = _rng.randrange(0, 2**31)
        m = abs(r) % abs(v)
        return m
    if t is float:
        return v * _rng.random()
    return ERROR


# --------------------------------------------------------------------------------------------
# Nested ads
# --------------------------------------------------------------------------------------------

def _context_expr(st: Any, node: Any) -> Any:
    """The expression to evaluate in each nested ad.

    An attribute reference that resolves in the calling scope stands for the expression it names
    (``countMatches(RequireGpus, AvailableGpus)`` applies the job's ``RequireGpus`` to each GPU);
    one that does not is evaluated as is in each ad (``evalInEachContext(Capability, Gpus)``).
    """
    if _is_attr_ref(node):
        ref = st.attr_expr(node)
        if ref is not None:
            return getattr(ref, "node", ref)
    return node


def fn_evalineachcontext(st: Any, args: Sequence[Any]) -> Value:
    """``evalInEachContext(expr, ads)``: the list of ``expr`` evaluated in each record."""
    if len(args) != 2:
        return ERROR
    node = _context_expr(st, args[0])
    lst = args[1].ev(st)
    if lst is UNDEFINED:
        return UNDEFINED
    if type(lst) is not list:
        return ERROR
    out = []
    for item in lst:
        if item is UNDEFINED:
            out.append(UNDEFINED)
        elif is_classad(item):
            out.append(st.eval_in(node, item))
        else:
            out.append(ERROR)
    return out


def fn_countmatches(st: Any, args: Sequence[Any]) -> Value:
    """``countMatches(expr, ads)``: how many records make ``expr`` true (others are ignored)."""
    if len(args) != 2:
        return ERROR
    node = _context_expr(st, args[0])
    lst = args[1].ev(st)
    if lst is UNDEFINED:
        return 0
    if type(lst) is not list:
        return ERROR
    n = 0
    for item in lst:
        if is_classad(item):
            r = st.eval_in(node, item)
            t = type(r)
            if (t is bool or t is int or t is float) and r:
                n += 1
    return n


# --------------------------------------------------------------------------------------------
# The registry
# --------------------------------------------------------------------------------------------

FUNCTIONS: dict[str, FunctionType] = {
    "isundefined": _predicate(lambda v: v is UNDEFINED),
    "iserror": _predicate(lambda v: v is ERROR),
    "isstring": _predicate(_is_str),
    "isinteger": _predicate(_is_int),
    "isreal": _predicate(_is_real),
    "isboolean": _predicate(_is_bool),
    "islist": _predicate(_is_list),
    "isclassad": _predicate(is_classad),
    "isabstime": _predicate(_is_abstime),
    "isreltime": _predicate(_is_reltime),
    "ifthenelse": fn_ifthenelse,
    "eval": fn_eval,
    "unparse": fn_unparse,
    "debug": fn_debug,
    "int": fn_int,
    "real": fn_real,
    "string": fn_string,
    "bool": fn_bool,
    "floor": _rounder(math.floor),
    "ceil": _rounder(math.ceil),
    "ceiling": _rounder(math.ceil),
    "round": _rounder(_rint),
    "pow": fn_pow,
    "quantize": fn_quantize,
    "random": fn_random,
    "evalineachcontext": fn_evalineachcontext,
    "countmatches": fn_countmatches,
}

from .functions_argsenv import ARGSENV_FUNCTIONS  # noqa: E402  (registry assembled in order)
from .functions_lists import LIST_FUNCTIONS  # noqa: E402
from .functions_regex import REGEX_FUNCTIONS  # noqa: E402
from .functions_strings import STRING_FUNCTIONS  # noqa: E402
from .functions_time import TIME_FUNCTIONS  # noqa: E402

FUNCTIONS.update(LIST_FUNCTIONS)
FUNCTIONS.update(STRING_FUNCTIONS)
FUNCTIONS.update(REGEX_FUNCTIONS)
FUNCTIONS.update(TIME_FUNCTIONS)
FUNCTIONS.update(ARGSENV_FUNCTIONS)


def _total(fn: FunctionType) -> FunctionType:
    """``fn`` made total: an unexpected Python exception inside it gives ``error``.

    Running out of stack or of the evaluation budget is left to propagate, so that the evaluation
    as a whole gives up at once.
    """
    def call(st: Any, args: Sequence[Any]) -> Value:
        try:
            return fn(st, args)
        except (RecursionError, BudgetExhausted):
            raise
        except Exception:
            return ERROR
    call.__name__ = getattr(fn, "__name__", "call")
    call.__doc__ = fn.__doc__
    call.__wrapped__ = fn  # type: ignore[attr-defined]
    return call


FUNCTIONS = {name: _total(fn) for name, fn in FUNCTIONS.items()}

__all__ = ["FUNCTIONS"]
