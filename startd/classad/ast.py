"""The expression tree of the ClassAd language.

Nodes are plain, immutable-by-convention objects. The evaluator compiles each tree once into Python
closures (see :mod:`startd.classad.evaluate`); a node's ``ev`` attribute is its compiled closure,
filled in lazily, so a node can be evaluated directly: ``node.ev(state)``.

The compiler and the unparser dispatch on every node class, so they sit above this module; each
installs itself here when it is imported (:func:`install_compiler`, :func:`install_unparser`), and
the package ``startd.classad`` imports both.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, cast

Closure = Callable[[Any], Any]


def _no_compiler(node: Node) -> Closure:
    raise RuntimeError("the ClassAd compiler is installed by importing startd.classad")


# Plain module globals, read once per node (on its first evaluation) or per repr().
_compile: Callable[[Node], Closure] = _no_compiler
_node_text: Callable[[Node], str] | None = None


def install_compiler(compile_node: Callable[[Node], Closure]) -> None:
    """Set the compiler behind :attr:`Node.ev` (done by :mod:`startd.classad.evaluate` when it is imported)."""
    global _compile
    _compile = compile_node


def install_unparser(node_text: Callable[[Node], str]) -> None:
    """Set the text ``repr()`` shows of a node (done by :mod:`startd.classad.unparse` when it is imported)."""
    global _node_text
    _node_text = node_text


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
            fn = self._ev = _compile(self)
        return fn

    def __repr__(self) -> str:
        text = "..." if _node_text is None else _node_text(self)
        return f"<{type(self).__name__} {text}>"


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


# --- walking a tree -------------------------------------------------------------------------------


def iter_nodes(node: Node) -> Iterator[Node]:
    """Every node of a tree, parents before children."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        # the class is tested once; each branch casts ``n`` to the class it tested
        t = type(n)
        if t is BinaryOp:
            bop = cast(BinaryOp, n)
            stack += (bop.right, bop.left)
        elif t is UnaryOp:
            stack.append(cast(UnaryOp, n).operand)
        elif t is Paren:
            stack.append(cast(Paren, n).inner)
        elif t is Conditional:
            c = cast(Conditional, n)
            stack.append(c.other)
            if c.then is not None:
                stack.append(c.then)
            stack.append(c.cond)
        elif t is Subscript:
            sub = cast(Subscript, n)
            stack += (sub.index, sub.base)
        elif t is AttrRef:
            base = cast(AttrRef, n).base
            if base is not None:
                stack.append(base)
        elif t is Call:
            stack += reversed(cast(Call, n).args)
        elif t is ListExpr:
            stack += reversed(cast(ListExpr, n).items)
        elif t is RecordExpr:
            stack += reversed([e for _, e in cast(RecordExpr, n).attrs])


def taller_than(node: Node, limit: int) -> bool:
    """Whether the tree has more than ``limit`` levels (measured without recursion: it may be taller
    than the stack)."""
    stack = [(node, 1)]
    while stack:
        n, level = stack.pop()
        if level > limit:
            return True
        level += 1
        # the class is tested once; each branch casts ``n`` to the class it tested
        t = type(n)
        if t is BinaryOp:
            bop = cast(BinaryOp, n)
            stack += ((bop.left, level), (bop.right, level))
        elif t is UnaryOp:
            stack.append((cast(UnaryOp, n).operand, level))
        elif t is Paren:
            stack.append((cast(Paren, n).inner, level))
        elif t is Conditional:
            c = cast(Conditional, n)
            stack += ((c.cond, level), (c.other, level))
            if c.then is not None:
                stack.append((c.then, level))
        elif t is Subscript:
            sub = cast(Subscript, n)
            stack += ((sub.base, level), (sub.index, level))
        elif t is AttrRef:
            base = cast(AttrRef, n).base
            if base is not None:
                stack.append((base, level))
        elif t is Call:
            stack += ((a, level) for a in cast(Call, n).args)
        elif t is ListExpr:
            stack += ((a, level) for a in cast(ListExpr, n).items)
        elif t is RecordExpr:
            stack += ((e, level) for _, e in cast(RecordExpr, n).attrs)
    return False


def references(node: Node) -> set[str]:
    """Names of the attributes a tree refers to: unscoped names, and ``MY.x``/``TARGET.x`` as ``x``."""
    out: set[str] = set()
    for n in iter_nodes(node):
        if type(n) is AttrRef:
            if n.base is None:
                if n.lname not in ("my", "target", "self", "parent", "toplevel", "root", "other", "ad"):
                    out.add(n.name)
            elif type(n.base) is AttrRef and n.base.base is None and n.base.lname in ("my", "target"):
                out.add(n.name)
    return out
