"""ClassAds (records) and expressions: the public objects of the language.

A ClassAd is also a value (a record), so the evaluator, the operators, the unparsers and the
function library all take ClassAds apart and build them: they sit above this module and import it.
The methods here that evaluate or unparse reach them through entry points that those modules
install when they are imported (:func:`install_evaluator`, :func:`install_unparser`); the package
``startd.classad`` imports both, so every method works once the package is imported.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any, Callable, TypeGuard

from .ast import AttrRef, ListExpr, Literal, Node, RecordExpr, references
from .parser import Parser, _check_text, _precise, old_ad_attrs, parse_node
from .values import ERROR, UNDEFINED, AbsTime, RelTime

# (node, MY, TARGET, now, clock) -> value: startd.classad.evaluate.evaluate_node
EvaluateNode = Callable[[Node, Any, Any, "float | None", "Callable[[], float] | None"], Any]


def _not_installed(*args: Any) -> Any:
    raise RuntimeError("the ClassAd evaluator and unparser are installed by importing startd.classad")


# Plain module globals, so a method calls them as cheaply as an imported function.
_evaluate_node: EvaluateNode = _not_installed
_unparse_node: Callable[[Node], str] = _not_installed
_unparse_ad: Callable[["ClassAd"], str] = _not_installed
_unparse_old: Callable[["ClassAd", bool], str] = _not_installed


def install_evaluator(evaluate_node: EvaluateNode) -> None:
    """Set the evaluator behind :meth:`Expr.evaluate` and :meth:`ClassAd.evaluate` (done by
    :mod:`startd.classad.evaluate` when it is imported)."""
    global _evaluate_node
    _evaluate_node = evaluate_node


def install_unparser(node_text: Callable[[Node], str], ad_text: Callable[["ClassAd"], str],
                     old_text: Callable[["ClassAd", bool], str]) -> None:
    """Set the text of an expression, of an ad in new syntax and of an ad in old syntax, behind
    ``str()``, ``==`` and :meth:`ClassAd.to_old` (done by :mod:`startd.classad.unparse` when it is
    imported)."""
    global _unparse_node, _unparse_ad, _unparse_old
    _unparse_node = node_text
    _unparse_ad = ad_text
    _unparse_old = old_text


class Expr:
    """A parsed ClassAd expression.

    ``str(e)`` is its canonical text; ``e.evaluate(my, target=...)`` its value. Two expressions
    compare equal when their canonical texts are equal.
    """

    __slots__ = ("node",)

    def __init__(self, node: Node | str) -> None:
        if isinstance(node, str):
            node = parse_node(node)
        self.node = node

    def evaluate(
        self,
        my: "ClassAd | Mapping[str, Any] | None" = None,
        target: "ClassAd | Mapping[str, Any] | None" = None,
        *,
        now: float | None = None,
        clock: Callable[[], float] | None = None,
    ) -> Any:
        """Evaluate with MY = ``my`` and TARGET = ``target``. Never raises: failures yield ERROR."""
        if my is not None and not isinstance(my, ClassAd):
            my = ClassAd(my)
        if target is not None and not isinstance(target, ClassAd):
            target = ClassAd(target)
        return _evaluate_node(self.node, my, target, now, clock)

    def __str__(self) -> str:
        return _unparse_node(self.node)

    def __repr__(self) -> str:
        return f"Expr({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Expr):
            return str(self) == str(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(str(self))

    def is_literal(self) -> bool:
        """True when the expression is a constant (its value needs no evaluation)."""
        return isinstance(self.node, Literal)


def value_to_node(value: Any) -> Node:
    """The literal node for a Python value (lists and dicts become list and record constructors)."""
    if isinstance(value, Expr):
        return value.node
    if isinstance(value, Node):
        return value
    t = type(value)
    if t is bool or t is int or t is float or t is str or value is UNDEFINED or value is ERROR or t is AbsTime or t is RelTime:
        return Literal(value)
    if isinstance(value, bool):
        return Literal(bool(value))
    if isinstance(value, int):
        return Literal(int(value))
    if isinstance(value, float):
        return Literal(float(value))
    if isinstance(value, str):
        return Literal(str(value))
    if isinstance(value, ClassAd):
        return Literal(value)
    if isinstance(value, Mapping):
        return RecordExpr([(str(k), value_to_node(v)) for k, v in value.items()])
    if isinstance(value, (list, tuple)):
        return ListExpr([value_to_node(v) for v in value])
    if value is None:
        return Literal(UNDEFINED)
    raise TypeError(f"cannot store a {t.__name__} in a ClassAd")


_LITERAL_TYPES = frozenset((bool, int, float, str, AbsTime, RelTime, type(UNDEFINED), type(ERROR)))

# Thousands of slot ads hold the same names and mostly the same small values: the names' spellings and the
# literal nodes of booleans, integers and short strings are shared between ads (nodes are never changed in
# place, so sharing one is safe; its compiled form is shared with it). The tables are bounded, so hostile
# input (a job ad of a million distinct names) cannot grow them: past the bound, nothing more is shared.
_SHARE_MAX = 16384
_SPELLINGS: dict[str, tuple[str, str]] = {}  # name -> (the shared spelling, its lower case)
# lower-case name -> the spelling every ad shares (the first seen). An ad's ``_names`` holds only the
# spellings that differ from it: the 2048 slot ads of a large machine, a hundred and more attributes each,
# would otherwise each keep a table of them all.
_CANON: dict[str, str] = {}
_BOOL_NODES = {True: Literal(True), False: Literal(False)}
_INT_NODES: dict[int, Literal] = {}
_STR_NODES: dict[str, Literal] = {}


def _spelling(name: str) -> tuple[str, str]:
    """(a shared copy of ``name``, its lower case)."""
    got = _SPELLINGS.get(name)
    if got is None:
        got = (name, name.lower())
        if len(_SPELLINGS) < _SHARE_MAX:
            _SPELLINGS[name] = got
    return got


def _shared_spelling(name: str, lname: str) -> bool:
    """True when ``name`` is the spelling of ``lname`` that ads share (it becomes it when there is none yet)."""
    canon = _CANON.get(lname)
    if canon is None:
        if len(_CANON) >= _SHARE_MAX:
            return False
        _CANON[lname] = canon = name
    return canon == name


def own_spellings(names: Mapping[str, str]) -> dict[str, str]:
    """The part of a table of spellings (lower-case name -> name) that an ad keeps: those not shared."""
    return {lname: name for lname, name in names.items() if not _shared_spelling(name, lname)}


def _literal(value: Any) -> Literal:
    """The literal node of ``value`` (shared when it is a boolean, an integer or a short string)."""
    t = type(value)
    if t is bool:
        return _BOOL_NODES[value]
    table = _INT_NODES if t is int else _STR_NODES if t is str and len(value) <= 64 else None
    if table is None:
        return Literal(value)
    node = table.get(value)
    if node is None:
        node = Literal(value)
        if len(table) < _SHARE_MAX:
            table[value] = node
    return node


class ClassAd(MutableMapping[str, Expr]):
    """A ClassAd: a record mapping attribute names (case-insensitive, case-preserving) to expressions.

    Assigning a Python value stores it as a literal; assigning an :class:`Expr` stores the expression.
    """

    __slots__ = ("_attrs", "_names", "_parent", "_shared", "_gen", "_xgen", "__weakref__")

    def __init__(self, init: "Mapping[str, Any] | str | None" = None, **kwargs: Any) -> None:
        self._attrs: dict[str, Node] = {}
        self._names: dict[str, str] = {}
        self._parent: ClassAd | None = None
        self._shared = False
        self._gen = 0
        self._xgen = 0
        if isinstance(init, str):
            parsed = parse_ad(init)
            self._attrs = dict(parsed._attrs)
            self._names = dict(parsed._names)  # (already only the spellings not shared)
        elif init is not None:
            for k, v in init.items():
                self[k] = v
        for k, v in kwargs.items():
            self[k] = v

    @classmethod
    def _make(cls, attrs: dict[str, Node], names: dict[str, str], parent: "ClassAd | None") -> "ClassAd":
        """A record sharing ``attrs``/``names`` until it is first modified (copy on write)."""
        ad = cls.__new__(cls)
        ad._attrs = attrs
        ad._names = names
        ad._parent = parent
        ad._shared = True
        ad._gen = 0
        ad._xgen = 0
        return ad

    def _own(self) -> None:
        if self._shared:
            self._attrs = dict(self._attrs)
            self._names = dict(self._names)
            self._shared = False

    # --- mapping protocol ---
    def __getitem__(self, name: str) -> Expr:
        node = self._attrs.get(name.lower())
        if node is None:
            raise KeyError(name)
        return Expr(node)

    def __setitem__(self, name: str, value: Any) -> None:
        if type(value) in _LITERAL_TYPES and type(name) is str and name:
            # the common case (an engine refreshing numbers and strings): no conversion needed
            if self._shared:
                self._own()
            name, lname = _spelling(name)
            old = self._attrs.get(lname)
            if not (type(old) is Literal and type(old.value) is type(value) and old.value == value):
                self._attrs[lname] = _literal(value)
                self._gen += 1
                if old is not None and type(old) is not Literal:
                    self._xgen += 1  # an expression replaced
            elif (self._names.get(lname) or _CANON.get(lname)) == name:
                return  # the same value under the same spelling: nothing changed
            self._spell(name, lname)
            self._gen += 1
            return
        if not isinstance(name, str) or not name:
            raise KeyError(f"invalid attribute name {name!r}")
        self._own()
        node = value_to_node(value)
        if isinstance(node, Literal) and isinstance(node.value, ClassAd) and node.value._parent is None:
            node.value._parent = self
        name, lname = _spelling(name)
        self._attrs[lname] = node
        self._spell(name, lname)
        self._gen += 1
        self._xgen += 1

    def __delitem__(self, name: str) -> None:
        lname = name.lower()
        if lname not in self._attrs:
            raise KeyError(name)
        self._own()
        if type(self._attrs[lname]) is not Literal:
            self._xgen += 1
        del self._attrs[lname]
        self._names.pop(lname, None)
        self._gen += 1

    def _spell(self, name: str, lname: str) -> None:
        """Record ``name`` as the spelling of ``lname`` (kept only when it is not the shared one)."""
        if _CANON.get(lname) == name or _shared_spelling(name, lname):
            if lname in self._names:
                del self._names[lname]
        else:
            self._names[lname] = name

    def spelled(self, lname: str) -> str:
        """The spelling of the attribute whose lower-case name is ``lname`` (one this ad has)."""
        return self._names.get(lname) or _CANON[lname]

    def spelling_table(self) -> Mapping[str, str]:
        """Lower-case name -> spelling, for every attribute of this ad (and maybe more): for a loop over the
        whole ad. Not to be changed: it is the table the ads share when this one has no spelling of its own."""
        own = self._names
        if not own:
            return _CANON
        return {k: own.get(k) or _CANON[k] for k in self._attrs}

    def spelled_items(self) -> list[tuple[str, Node]]:
        """(name as spelt, expression tree) of every attribute, in order."""
        own, canon = self._names, _CANON
        return [(own.get(k) or canon[k], n) for k, n in self._attrs.items()]

    def __iter__(self) -> Iterator[str]:
        own, canon = self._names, _CANON
        return iter([own.get(k) or canon[k] for k in self._attrs])

    def __len__(self) -> int:
        return len(self._attrs)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._attrs

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ClassAd):
            return NotImplemented
        if self._attrs.keys() != other._attrs.keys():
            return False
        return all(_unparse_node(n) == _unparse_node(other._attrs[k]) for k, n in self._attrs.items())

    __hash__ = None  # type: ignore[assignment]

    # --- ClassAd operations ---
    def set_expr(self, name: str, text: str) -> None:
        """Parse ``text`` and store it as the expression of ``name``."""
        self[name] = Expr(parse_node(text))

    def lookup(self, name: str) -> Expr | None:
        """The expression of ``name`` in this ad (not its enclosing scopes), or None."""
        node = self._attrs.get(name.lower())
        return None if node is None else Expr(node)

    def get_node(self, name: str) -> Node | None:
        """The tree of ``name``'s expression, or None."""
        return self._attrs.get(name.lower())

    def name_of(self, name: str) -> str:
        """The attribute name as it was spelt when set."""
        lname = name.lower()
        return self.spelled(lname) if lname in self._attrs else name

    def evaluate(
        self,
        name: str,
        target: "ClassAd | None" = None,
        *,
        now: float | None = None,
        clock: Callable[[], float] | None = None,
    ) -> Any:
        """The value of attribute ``name`` with MY = this ad and TARGET = ``target``.

        A name this ad does not define is looked up as an unscoped reference would be: in the
        target of the match, else ``undefined``.
        """
        node = self._attrs.get(name.lower())
        if node is None:
            node = AttrRef(name)
        return _evaluate_node(node, self, target, now, clock)

    def eval_expr(self, text: str, target: "ClassAd | None" = None, *, now: float | None = None) -> Any:
        """Parse ``text`` and evaluate it with MY = this ad."""
        return _evaluate_node(parse_node(text), self, target, now, None)

    def matches(self, other: "ClassAd", *, now: float | None = None) -> bool:
        """True when this ad's Requirements evaluate to exactly ``true`` against ``other``."""
        return self.evaluate("Requirements", other, now=now) is True

    @staticmethod
    def symmetric_match(a: "ClassAd", b: "ClassAd", *, now: float | None = None) -> bool:
        """True when each ad's Requirements is exactly ``true`` against the other."""
        return a.evaluate("Requirements", b, now=now) is True and b.evaluate("Requirements", a, now=now) is True

    @property
    def generation(self) -> int:
        """A counter that grows whenever this ad changes (an attribute set to a different value or
        spelling, added or removed); equal generations of the same ad object mean the same content, so
        a cache of anything derived from the ad (its JSON, its text) can be keyed on ``(ad, generation)``.
        Storing a value equal to the one already there does not count as a change."""
        return self._gen

    @property
    def expr_generation(self) -> int:
        """A counter that grows whenever an attribute may have gained, lost or changed an expression that
        is not a constant (a constant replaced by another constant does not count): whatever is derived
        from which attributes the ad's expressions refer to can be keyed on ``(ad, expr_generation)``."""
        return self._xgen

    def copy(self) -> "ClassAd":
        """A shallow copy (expressions are shared; they are immutable)."""
        ad = ClassAd()
        ad._attrs = dict(self._attrs)
        ad._names = dict(self._names)
        return ad

    def update(self, other: Any = (), /, **kwargs: Any) -> None:
        if isinstance(other, ClassAd):
            self._own()
            self._attrs.update(other._attrs)
            for lname in other._attrs:
                spelling = other._names.get(lname)
                if spelling is not None:
                    self._names[lname] = spelling
                elif lname in self._names:
                    del self._names[lname]  # the other's is the shared one
            self._gen += 1
            self._xgen += 1
        else:
            super().update(other, **kwargs)
        for k, v in kwargs.items():
            self[k] = v

    def __str__(self) -> str:
        return _unparse_ad(self)

    def __repr__(self) -> str:
        return f"ClassAd({str(self)!r})"

    def to_old(self, sort: bool = False) -> str:
        """The old one-attribute-a-line form, as ``condor_status -l`` prints it."""
        return _unparse_old(self, sort)

    def external_refs(self, name: str) -> set[str]:
        """Names that ``name``'s expression refers to and this ad does not define."""
        node = self._attrs.get(name.lower())
        if node is None:
            return set()
        return {r for r in references(node) if r.lower() not in self._attrs}


def is_classad(v: Any) -> TypeGuard[ClassAd]:
    """True when ``v`` is a record value (a :class:`ClassAd`)."""
    return isinstance(v, ClassAd)


def parse_expr(text: str | bytes) -> Expr:
    """Parse one expression (new syntax). Raises :class:`ClassAdSyntaxError` naming line and column."""
    return Expr(parse_node(text))


def parse_ad(text: str | bytes, *, source: str = "") -> ClassAd:
    """Parse one ad: new syntax (``[ a = 1; b = 2 ]``) or old (one ``Name = expr`` a line)."""
    text = _check_text(text)
    stripped = text.lstrip()
    if stripped.startswith("["):

        def parse(precise: bool) -> RecordExpr:
            p = Parser(text, source=source, precise=precise)
            p.next()
            rec = p.record_body()
            if p.peek()[0] != "eof":
                raise p.error("unexpected text after the end of the ad")
            return rec

        node = _precise(parse)
        ad = ClassAd()
        for name, expr in node.attrs:
            ad._attrs[name.lower()] = expr
            ad._spell(name, name.lower())
        return ad
    ad = ClassAd()
    ad._attrs, names = old_ad_attrs(text, source)
    ad._names = own_spellings(names)
    return ad


def parse_ads(text: str | bytes, *, source: str = "") -> list[ClassAd]:
    """Parse a sequence of ads: new-syntax records one after another, or old-syntax ads separated by blank lines."""
    text = _check_text(text)
    if text.lstrip().startswith("["):

        def parse(precise: bool) -> list[RecordExpr]:
            p = Parser(text, source=source, precise=precise)
            recs = []
            while p.peek()[0] != "eof":
                p.expect_op("[")
                recs.append(p.record_body())
            return recs

        ads = []
        for node in _precise(parse):
            ad = ClassAd()
            for name, expr in node.attrs:
                ad._attrs[name.lower()] = expr
                ad._spell(name, name.lower())
            ads.append(ad)
        return ads
    ads = []
    block: list[str] = []
    start = 1
    lines = text.split("\n")
    for i, line in enumerate(lines + [""], 1):
        if line.strip() == "":
            if any(b.strip() and not b.strip().startswith("#") for b in block):
                ad = ClassAd()
                ad._attrs, names = old_ad_attrs("\n".join(block), source, start)
                ad._names = own_spellings(names)
                ads.append(ad)
            block = []
            start = i + 1
        else:
            block.append(line)
    return ads
