"""The shape of the code (shared/DESIGN.md): no import cycles anywhere in startd/, arrows pointing down,
and the engine split into rooms a reader can walk, each under 600 lines.

Imports are read from the source, every one of them: at module level, inside functions, and under
``if TYPE_CHECKING:``, so a cycle cannot hide behind a late import.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "startd"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph() -> dict[str, set[str]]:
    """Module -> the startd modules it imports (``from pkg import name`` counts the submodule when
    ``name`` is one)."""
    modules = {_module_name(p): p for p in PKG.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in modules.items():
        tree = ast.parse(path.read_text())
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(mod, is_package, node)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for t in targets:
                if t in modules and t != mod:
                    graph[mod].add(t)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _package_of(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_no_import_cycle_anywhere_in_startd() -> None:
    graph = import_graph()
    # a package's __init__ re-exports its modules; importing it from one of them would be a cycle too
    assert _cycles(graph) == []


def test_the_engine_never_imports_the_shells_or_their_libraries() -> None:
    graph = import_graph()
    shells = {"startd.daemon", "startd.simulate", "startd.cli", "startd.transport", "startd.starter",
              "startd.host", "startd.cron", "startd.hooks"}
    for mod, deps in graph.items():
        if mod.startswith("startd.engine"):
            assert not {_package_of(d) for d in deps} & shells, (mod, deps)
    for path in (PKG / "engine").glob("*.py"):
        names = {a.name.split(".")[0] for n in ast.walk(ast.parse(path.read_text()))
                 if isinstance(n, ast.Import) for a in n.names}
        names |= {(n.module or "").split(".")[0] for n in ast.walk(ast.parse(path.read_text()))
                  if isinstance(n, ast.ImportFrom) and n.level == 0}
        assert not names & {"asyncio", "psutil", "aiomqtt", "amqtt", "subprocess", "socket"}, path.name


def test_the_engine_layers_import_only_downwards() -> None:
    """claim/policy <- resource <- resstate <- claiming <- hookmgr <- draining <- resmgr <- command
    (HTCondor's Claim, Resource, ResState, Resource/Claim's claiming half, StartdHookMgr, ResMgr's draining
    and the rest of ResMgr, command.cpp)."""
    order = ["states", "events", "convert", "claim", "policy", "cronhooks", "resource", "slotad", "resstate", "claiming",
             "hookmgr", "draining", "resmgr", "command"]
    rank = {f"startd.engine.{m}": i for i, m in enumerate(order)}
    graph = import_graph()
    for mod, deps in graph.items():
        if mod in rank:
            for d in deps:
                if d in rank:
                    assert rank[d] < rank[mod], f"{mod} imports {d}, which is above it"


def test_no_engine_module_is_over_six_hundred_lines() -> None:
    for path in sorted((PKG / "engine").glob("*.py")):
        n = len(path.read_text().splitlines())
        assert n <= 600, f"{path.name} has {n} lines"


def test_no_module_of_the_package_is_much_over_six_hundred_lines() -> None:
    """The house rule (~600 lines a room) for every module; the generated table of HTCondor's defaults
    (config/defaults.py, written by config/_gen_defaults.py) is data, not a room."""
    for path in sorted(PKG.rglob("*.py")):
        if path.relative_to(PKG).as_posix() == "config/defaults.py":
            continue
        n = len(path.read_text().splitlines())
        assert n <= 650, f"{path.relative_to(PKG)} has {n} lines"
