"""The expression tree of the ClassAd language.

Nodes are plain, immutable-by-convention objects. The evaluator compiles each tree once into Python
closures (see :mod:`startd.classad.evaluate`); a node's ``ev`` attribute is its compiled closure,
filled in lazily, so a node can be evaluated directly: ``node.ev(state)``.
"""

from __future__ import annotations

from typing import Any, Callable

Closure = Callable[[Any], Any]


class Node:
    """Base class of expression nodes."""

    __slots__ = ("_ev",)

    def __init__(self) -> None:
        self._ev: Closure | None = None

    @property
    def ev(self) -> Closure:
        """The compiled closure ``f(state) -> value`` of this node."""
        fn = self._ev
        if fn is None:
            from .evaluate import compile_node

            fn = self._ev = compile_node(self)
        return fn

    def __repr__(self) -> str:
        from .unparse import unparse_node

        return f"<{type(self).__name__} {unparse_node(self)}>"


class Literal(Node):
    """A constant: number, string, boolean, undefined, error, or a time."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self._ev = None
        self.value = value


class AttrRef(Node):
    """An attribute reference: ``name``, ``.name`` (absolute) or ``base.name``."""

    __slots__ = ("name", "lname", "base", "absolute")

    def __init__(self, name: str, base: Node | None = None, absolute: bool = False) -> None:
        self._ev = None
        self.name = name
        self.lname = name.lower()
        self.base = base
        self.absolute = absolute


class UnaryOp(Node):
    """``-x``, ``+x``, ``!x``, ``~x``."""

    __slots__ = ("op", "operand")

    def __init__(self, op: str, operand: Node) -> None:
        self._ev = None
        self.op = op
        self.operand = operand


class BinaryOp(Node):
    """Every two-operand operator, ``&&`` and ``||`` included (``is``/``isnt`` are ``=?=``/``=!=``)."""

    __slots__ = ("op", "left", "right")

    def __init__(self, op: str, left: Node, right: Node) -> None:
        self._ev = None
        self.op = op
        self.left = left
        self.right = right


class Conditional(Node):
    """``cond ? then : else``; with ``then`` None it is the elvis operator ``cond ?: else``."""

    __slots__ = ("cond", "then", "other")

    def __init__(self, cond: Node, then: Node | None, other: Node) -> None:
        self._ev = None
        self.cond = cond
        self.then = then
        self.other = other


class Paren(Node):
    """Parentheses the author wrote; kept so unparsing reproduces them."""

    __slots__ = ("inner",)

    def __init__(self, inner: Node) -> None:
        self._ev = None
        self.inner = inner


class Subscript(Node):
    """``base[index]``: a list element or a record attribute by name."""

    __slots__ = ("base", "index")

    def __init__(self, base: Node, index: Node) -> None:
        self._ev = None
        self.base = base
        self.index = index


class Call(Node):
    """A function call ``name(args...)``."""

    __slots__ = ("name", "lname", "args")

    def __init__(self, name: str, args: list[Node]) -> None:
        self._ev = None
        self.name = name
        self.lname = name.lower()
        self.args = args


class ListExpr(Node):
    """A list constructor ``{ a, b, ... }``."""

    __slots__ = ("items",)

    def __init__(self, items: list[Node]) -> None:
        self._ev = None
        self.items = items


class RecordExpr(Node):
    """A record constructor ``[ name = expr; ... ]``."""

    __slots__ = ("attrs",)

    def __init__(self, attrs: list[tuple[str, Node]]) -> None:
        self._ev = None
        self.attrs = attrs
