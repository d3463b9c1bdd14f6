"""Evaluation of ClassAd expressions, faithful to HTCondor's semantics.

Each tree is compiled once into nested Python closures ``f(state) -> value``; evaluation then costs
one call per node and no dispatch on node types. :class:`EvalState` carries what the closures
need: the current scope (the record whose attributes unscoped names see first), the two ads of a
match (MY and TARGET), the clock, the set of attributes under evaluation (a reference back into
one of them is a circular reference and yields ``undefined``, as in HTCondor), and the caller's
evaluation budget, if any (:mod:`startd.classad.limits`): function calls and attribute references
count against it, and when it runs out the whole evaluation stops with ``error``.

Scoping follows HTCondor's MatchClassAd: an unscoped name is looked up in the current record, then
its enclosing records; past the top-level ad the names ``MY``/``AD`` (the ad itself) and
``TARGET``/``OTHER`` (the other ad of the match) are defined; and a name found nowhere in that chain
is looked up in the other ad of the match (the "alternate scope"), when the reference is made from a
top-level ad. ``self``, ``parent``, ``toplevel``/``root`` and ``CurrentTime`` are special names.

The operators on values are :mod:`startd.classad.operators` (their closures
:mod:`startd.classad.compile_operators`), the functions :mod:`startd.classad.functions`. Importing
this module installs the compiler behind ``Node.ev`` and :func:`evaluate_node` behind
``Expr.evaluate``/``ClassAd.evaluate`` (those modules sit below it).
"""

from __future__ import annotations

import time
from typing import Any, Callable, cast

from .ad import ClassAd, install_evaluator, own_spellings
from .ast import (
    AttrRef, BinaryOp, Call, Conditional, ListExpr, Literal, Node, Paren, RecordExpr, Subscript, UnaryOp,
    install_compiler,
)
from .compile_operators import compile_binary, compile_chain, compile_compare_const, compile_unary
from .limits import MAX_EVAL_TEXT, BudgetExhausted, EvaluationBudget, charge_size, current_budget
from .parser import ClassAdSyntaxError, parse_node
from .values import ERROR, UNDEFINED

Value = Any
Closure = Callable[["EvalState"], Value]

MAX_ATTR_DEPTH = 1000
"""Deepest chain of attribute references followed before evaluation gives up with ``error``."""


def _system_clock() -> float:
    return time.time()


class EvalState:
    """The state of one evaluation."""

    __slots__ = ("scope", "left", "right", "root", "busy", "depth", "budget", "_clock", "_now")

    def __init__(
        self,
        scope: Any,
        left: Any = None,
        right: Any = None,
        root: Any = None,
        now: float | None = None,
        clock: Callable[[], float] | None = None,
        budget: EvaluationBudget | None = None,
    ) -> None:
        self.scope = scope
        self.left = left
        self.right = right
        self.root = root
        self.busy: set[tuple[int, int]] = set()
        self.depth = 0
        self.budget = budget
        self._clock = clock
        self._now = now

    def clock(self) -> float:
        """Current time, seconds since the epoch (a virtual clock when the caller supplied one)."""
        if self._now is not None:
            return self._now
        if self._clock is not None:
            return self._clock()
        return _system_clock()

    def local_tz_offset(self, secs: float) -> int:
        """Offset of local time from UTC, in seconds, at the instant ``secs``."""
        try:
            lt = time.localtime(secs)
        except (OverflowError, OSError, ValueError):
            lt = time.localtime(0)
        return int(lt.tm_gmtoff or 0)

    def eval_in(self, node: Node, scope: Any) -> Value:
        """Evaluate ``node`` with ``scope`` (a ClassAd) as the current scope."""
        saved = self.scope
        self.scope = scope
        try:
            return node.ev(self)
        finally:
            self.scope = saved

    def eval_text(self, text: str) -> Value:
        """Parse ``text`` as an expression and evaluate it in the current scope (``eval()``)."""
        if len(text) > MAX_EVAL_TEXT:
            return ERROR
        charge_size(self, len(text))
        try:
            node = parse_node(text)
        except (ClassAdSyntaxError, RecursionError):
            return ERROR
        return node.ev(self)

    def attr_expr(self, node: Node) -> Node | None:
        """The expression an attribute-reference node refers to, or None."""
        while isinstance(node, Paren):
            node = node.inner
        if not isinstance(node, AttrRef):
            return None
        if node.base is None:
            if node.absolute:
                start = self.root
                if start is None:
                    return None
            else:
                start = self.scope
            found = _find(self, start, node.lname, not node.absolute)
        else:
            base = _fn(node.base)(self)
            if not _is_ad(base):
                return None
            found = _find(self, base, node.lname, False)
        if found is None or found[0] is not _EXPR:
            return None
        return cast(Node, found[1])


# --- attribute lookup ----------------------------------------------------------------------------

_EXPR = object()  # marker: lookup found an expression (found[1]) in scope found[2]
_VALUE = object()  # marker: lookup found a value directly (special names)


def _is_ad(v: Any) -> bool:
    return isinstance(v, ClassAd)


# HTCondor's daemons run with the old ClassAd semantics, where MY and CurrentTime are special names
# like self: MY is the innermost record the reference is made from.
_SPECIAL = frozenset(("self", "my", "parent", "toplevel", "root", "currenttime"))


def _find(st: EvalState, start: Any, lname: str, alternate: bool) -> tuple[Any, Any, Any] | None:
    """HTCondor's LookupInScope, plus the match context and (for unscoped names) the alternate scope."""
    cur = start
    while cur is not None:
        node = cur._attrs.get(lname)
        if node is not None:
            return (_EXPR, node, cur)
        if lname in _SPECIAL:
            return (_VALUE, _special(st, cur, lname), cur)
        parent = cur._parent
        if parent is None:
            ctx = _context_name(st, cur, lname)
            if ctx is not None:
                return (_VALUE, ctx, cur)
        cur = parent
    if alternate:
        other = None
        if start is st.left:
            other = st.right
        elif start is st.right:
            other = st.left
        if other is not None:
            return _find(st, other, lname, False)
    return None


def _context_name(st: EvalState, ad: Any, lname: str) -> Any:
    if ad is st.left:
        me, other = ad, st.right
    elif ad is st.right:
        me, other = ad, st.left
    else:
        return None
    if lname == "my" or lname == "ad":
        return me
    if (lname == "target" or lname == "other") and other is not None:
        return other
    return None


def _special(st: EvalState, cur: Any, lname: str) -> Value:
    if lname == "self" or lname == "my":
        return cur
    if lname == "parent":
        p = cur._parent
        return p if p is not None else UNDEFINED
    if lname == "currenttime":
        return int(st.clock())
    # toplevel / root
    return st.root if st.root is not None else UNDEFINED


def _eval_found(st: EvalState, found: tuple[Any, Any, Any] | None) -> Value:
    if found is None:
        return UNDEFINED
    kind, node, scope = found
    if kind is _VALUE:
        return node
    return _eval_expr(st, node, scope)


def _eval_expr(st: EvalState, node: Node, scope: Any) -> Value:
    """The value of ``node``, an attribute's expression found in ``scope``."""
    if type(node) is Literal and st.budget is None and st.depth < MAX_ATTR_DEPTH:
        # a constant refers to nothing: no circularity to watch, no scope to switch
        return node.value
    key = (id(scope), id(node))
    busy = st.busy
    if key in busy:
        return UNDEFINED  # circular reference
    if st.depth >= MAX_ATTR_DEPTH:
        return ERROR
    budget = st.budget
    if budget is not None:
        budget.left -= 1
        if budget.left < 0:
            budget.refill()
    busy.add(key)
    saved = st.scope
    st.scope = scope
    st.depth += 1
    try:
        f = node._ev
        if f is None:
            f = node._ev = compile_node(node)
        return f(st)
    finally:
        st.depth -= 1
        st.scope = saved
        busy.discard(key)


def _select(st: EvalState, base: Value, lname: str) -> Value:
    if _is_ad(base):
        return _eval_found(st, _find(st, base, lname, False))
    if base is UNDEFINED:
        return UNDEFINED
    if type(base) is list:
        return [_select(st, item, lname) if (_is_ad(item) or item is UNDEFINED) else ERROR for item in base]
    return ERROR


# --- compiler ------------------------------------------------------------------------------------


def _fn(node: Node) -> Closure:
    """The compiled closure of ``node``, compiling it on first use.

    Compilation recurses through this plain function rather than the ``Node.ev`` property, so deep
    trees recurse in Python frames only and never through the C stack.
    """
    f = node._ev
    if f is None:
        f = node._ev = compile_node(node)
    return f


def compile_node(node: Node) -> Closure:
    """Compile a tree into a closure ``f(state) -> value``."""
    # Dispatch on the exact class, tested once; each branch casts ``node`` to the class it tested.
    t = type(node)
    if t is Literal:
        v = cast(Literal, node).value
        if _is_ad(v):
            # a record value stored in an ad: it keeps its own enclosing scope
            return lambda st: v
        return lambda st: v
    if t is AttrRef:
        return _compile_attr(cast(AttrRef, node))
    if t is BinaryOp:
        b = cast(BinaryOp, node)
        op = b.op
        if op == "&&" or op == "||":
            return compile_chain(op, [_fn(n) for n in _chain_operands(b)])
        c = _constant(b)
        if c is not _NOT_CONSTANT:
            return lambda st: c
        if op in _COMPARE:
            c = _constant(b.right)
            if c is not _NOT_CONSTANT:
                f = compile_compare_const(op, _fn(b.left), c)
                if f is not None:
                    return f
        return compile_binary(op, _fn(b.left), _fn(b.right))
    if t is UnaryOp:
        u = cast(UnaryOp, node)
        return compile_unary(u.op, _fn(u.operand))
    if t is Paren:
        return _fn(cast(Paren, node).inner)
    if t is Conditional:
        return _compile_conditional(cast(Conditional, node))
    if t is Subscript:
        return _compile_subscript(cast(Subscript, node))
    if t is Call:
        return _compile_call(cast(Call, node))
    if t is ListExpr:
        fns = [_fn(n) for n in cast(ListExpr, node).items]
        return lambda st: [f(st) for f in fns]
    if t is RecordExpr:
        return _compile_record(cast(RecordExpr, node))
    raise TypeError(f"cannot compile {t.__name__}")


def _chain_operands(node: BinaryOp) -> list[Node]:
    """The operands of a chain of one logical operator, left to right, parentheses looked through:
    ``a && (b && c) && d`` is ``[a, b, c, d]``. Walked without recursion (a chain may be long)."""
    op = node.op
    out: list[Node] = []
    stack: list[Node] = [node]
    while stack:
        n = stack.pop()
        while type(n) is Paren:
            n = n.inner
        if type(n) is BinaryOp and n.op == op:
            stack.append(n.right)
            stack.append(n.left)
        else:
            out.append(n)
    return out


_NOT_CONSTANT = object()
_COMPARE = frozenset(("<", "<=", ">", ">=", "==", "!="))
_FOLDABLE = frozenset(("+", "-", "*", "/", "%", "<", "<=", ">", ">=", "==", "!=", "=?=", "=!=",
                       "&", "|", "^", "<<", ">>", ">>>"))
_CONSTANT_TYPES = frozenset((bool, int, float, str))


def _constant(node: Node, depth: int = 0) -> Value:
    """The value of a small tree of number, string and boolean literals and operators (``15 * 60``),
    computed once when it is compiled; _NOT_CONSTANT for anything else. Operators on values refer to
    nothing and charge no budget, so the value is the one evaluation would give every time."""
    t = type(node)
    if t is Literal:
        v = cast(Literal, node).value
        return v if type(v) in _CONSTANT_TYPES else _NOT_CONSTANT
    if depth >= 3:
        return _NOT_CONSTANT
    if t is Paren:
        return _constant(cast(Paren, node).inner, depth + 1)
    if t is UnaryOp:
        u = cast(UnaryOp, node)
        v = _constant(u.operand, depth + 1)
        if v is _NOT_CONSTANT:
            return v
        return compile_unary(u.op, lambda st: v)(None)
    if t is BinaryOp and cast(BinaryOp, node).op in _FOLDABLE:
        b = cast(BinaryOp, node)
        x = _constant(b.left, depth + 1)
        y = _constant(b.right, depth + 1)
        if x is _NOT_CONSTANT or y is _NOT_CONSTANT:
            return _NOT_CONSTANT
        return compile_binary(b.op, lambda st: x, lambda st: y)(None)
    return _NOT_CONSTANT


def _compile_attr(node: AttrRef) -> Closure:
    lname = node.lname
    if node.base is None:
        if node.absolute:

            def absolute(st: EvalState) -> Value:
                root = st.root
                if root is None:
                    return UNDEFINED
                return _eval_found(st, _find(st, root, lname, False))

            return absolute

        def unscoped(st: EvalState) -> Value:
            # inline the common case: the attribute is defined right in the current scope
            scope = st.scope
            n = scope._attrs.get(lname)
            if n is not None:
                if type(n) is Literal and st.budget is None and st.depth < MAX_ATTR_DEPTH:
                    return n.value
                return _eval_expr(st, n, scope)
            return _eval_found(st, _find(st, scope, lname, True))

        return unscoped

    base = node.base
    if type(base) is AttrRef and base.base is None and not base.absolute and base.lname in ("target", "my"):
        base_fn = _fn(base)
        ctx = base.lname
        target = ctx == "target"

        def scoped_ctx(st: EvalState) -> Value:
            # MY.x / TARGET.x: resolve the scope name once, then look x up there. When the current
            # scope is one of the two ads of the match and defines no attribute of that name, MY is
            # that ad and TARGET the other (see _find); anything else takes the general way.
            scope = st.scope
            b: Any = None
            if ctx not in scope._attrs:
                if not target:
                    b = scope
                elif scope._parent is None:
                    if scope is st.left:
                        b = st.right
                    elif scope is st.right:
                        b = st.left
            if b is None:
                b = base_fn(st)
                if not _is_ad(b):
                    return _select(st, b, lname)
            n = b._attrs.get(lname)
            if n is None:
                return _select(st, b, lname)
            if type(n) is Literal and st.budget is None and st.depth < MAX_ATTR_DEPTH:
                return n.value
            return _eval_expr(st, n, b)

        return scoped_ctx

    bf = _fn(base)
    return lambda st: _select(st, bf(st), lname)


def _compile_record(node: RecordExpr) -> Closure:
    attrs = {name.lower(): expr for name, expr in node.attrs}
    names = own_spellings({name.lower(): name for name, _ in node.attrs})

    def record(st: EvalState) -> Value:
        return ClassAd._make(attrs, names, st.scope)

    return record


def _compile_conditional(node: Conditional) -> Closure:
    cf = _fn(node.cond)
    of = _fn(node.other)
    if node.then is None:

        def elvis(st: EvalState) -> Value:
            v = cf(st)
            return of(st) if v is UNDEFINED else v

        return elvis
    tf = _fn(node.then)

    def cond(st: EvalState) -> Value:
        c = cf(st)
        tc = type(c)
        if tc is bool:
            return tf(st) if c else of(st)
        if tc is int or tc is float:
            return tf(st) if c != 0 else of(st)
        if c is UNDEFINED:
            return UNDEFINED
        return ERROR

    return cond


def _compile_subscript(node: Subscript) -> Closure:
    bf = _fn(node.base)
    jf = _fn(node.index)

    def subscript(st: EvalState) -> Value:
        b = bf(st)
        i = jf(st)
        if b is ERROR or i is ERROR:
            return ERROR
        if b is UNDEFINED or i is UNDEFINED:
            return UNDEFINED
        tb = type(b)
        if tb is list:
            if type(i) is int:
                # the index is a C int: HTCondor keeps its low 32 bits
                if not -2147483648 <= i <= 2147483647:
                    i = ((i + 2147483648) & 0xFFFFFFFF) - 2147483648
                if 0 <= i < len(b):
                    return b[i]
            return ERROR
        if _is_ad(b) and type(i) is str:
            return _eval_found(st, _find(st, b, i.lower(), False))
        return ERROR

    return subscript


def _compile_call(node: Call) -> Closure:
    # The function library is imported with the first call compiled, not with the package: it takes
    # as long to import as the rest of the language, and many users of ClassAds never call a function.
    from .functions import FUNCTIONS

    impl = FUNCTIONS.get(node.lname)
    if impl is None:
        return lambda st: ERROR
    args = node.args

    def call(st: EvalState) -> Value:
        budget = st.budget
        if budget is not None:
            budget.left -= 1
            if budget.left < 0:
                budget.refill()
        return impl(st, args)

    return call


def evaluate_node(
    node: Node,
    scope: Any = None,
    target: Any = None,
    now: float | None = None,
    clock: Callable[[], float] | None = None,
) -> Value:
    """Evaluate a tree with MY = ``scope`` and TARGET = ``target``. Never raises: failures are ERROR.

    Under an :func:`~startd.classad.limits.evaluation_budget`, an evaluation that runs out of it is
    ERROR as a whole.
    """
    if scope is None:
        scope = ClassAd()
    root = scope if target is None else None
    budget = current_budget()
    st = EvalState(scope, scope, target, root, now, clock, budget)
    try:
        if budget is not None:
            budget.charge()
        return _fn(node)(st)
    except RecursionError:
        # deeper than any real policy: a chain of tens of thousands of operators
        return ERROR
    except BudgetExhausted:
        return ERROR


install_compiler(compile_node)
install_evaluator(evaluate_node)
