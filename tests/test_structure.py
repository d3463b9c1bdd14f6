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
    shells = {"startd.daemon", "startd.sim", "startd.cli", "startd.transport", "startd.starter",
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


# --- the rooms (shared/DESIGN.md) ------------------------------------------------------------------------

#: What each room may import, as DESIGN.md draws the arrows: the language at the bottom, then the
#: configuration, slots and the pure engine, then the pieces the shells wire (host, starter, cron, hooks,
#: security, the two wires), then the two shells, the administrator's tools and the command line on top.
#: ``startd`` is the package itself (its version).
ALLOWED = {
    "classad": set(),
    "qube": {"classad"},
    "config": {"startd", "classad"},
    "slots": {"classad", "config"},
    "engine": {"startd", "classad", "config", "qube", "slots"},
    "events_json": {"engine"},
    "security": {"startd", "classad", "config"},
    "host": {"startd", "classad", "config", "engine"},
    "hooks": {"classad", "engine"},
    "cron": {"classad", "config", "engine", "hooks"},
    "starter": {"startd", "classad", "config", "engine", "host", "security"},
    "transport": {"startd", "classad", "config", "engine", "security"},
    "cedar": {"startd", "classad", "config", "engine", "security"},
    "submit": {"startd", "classad", "config", "engine", "security", "starter", "transport"},
    "sim": {"startd", "classad", "config", "engine", "slots", "events_json", "cron", "hooks", "host", "qube"},
    "daemon": {"startd", "classad", "config", "engine", "slots", "events_json", "host", "starter", "cron",
               "hooks", "security", "transport", "cedar"},
    "tools": {"startd", "classad", "config", "engine", "slots", "qube", "host", "security", "transport",
              "submit", "daemon"},
    "analyze": {"startd", "classad", "config", "engine", "slots", "qube", "tools", "transport"},
    "cli": {"startd", "tools", "transport", "daemon", "sim", "analyze"},
}

#: The modules that may stand on the package's top floor, beside the rooms.
TOP_FLOOR_LIMIT = 8


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "startd"


def _room_edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for mod, deps in import_graph().items():
        for dep in deps:
            a, b = _room(mod), _room(dep)
            if a != b and a != "startd":
                edges.setdefault(a, set()).add(b)
    return edges


def test_the_top_floor_holds_at_most_eight_modules() -> None:
    """The simulator and the daemon live in rooms of their own (startd/sim, startd/daemon); what stays on
    the top floor is the package, the command line and the few commands that are a concept of their own."""
    top = sorted(p.name for p in PKG.glob("*.py"))
    assert len(top) <= TOP_FLOOR_LIMIT, top


def test_the_simulator_and_the_daemon_are_rooms_of_their_own() -> None:
    for room in ("sim", "daemon"):
        assert (PKG / room / "__init__.py").is_file(), room
    leftovers = sorted(p.name for p in PKG.glob("*.py")
                       if p.stem.startswith(("sim", "daemon")) or p.stem in {"scenario", "compare", "health",
                                                                           "supervise", "watchdog", "metrics",
                                                                           "logfiles"})
    assert leftovers == []


def test_every_room_is_known_and_imports_only_what_its_arrows_allow() -> None:
    for room, deps in sorted(_room_edges().items()):
        assert room in ALLOWED, f"startd/{room} is a room DESIGN.md does not draw: add it to ALLOWED"
        assert deps <= ALLOWED[room], f"startd/{room} imports {sorted(deps - ALLOWED[room])}, which it may not"


def test_no_room_imports_a_room_above_it() -> None:
    """No circle between rooms either: a function two rooms need lives in the lower one."""
    edges = _room_edges()
    graph = {r: edges.get(r, set()) for r in set(edges) | {d for ds in edges.values() for d in ds}}
    assert _cycles(graph) == []


def test_nothing_below_the_shells_imports_them() -> None:
    shells = {"sim", "daemon", "tools", "cli", "analyze"}
    for room, deps in _room_edges().items():
        if room not in shells | {"tools"}:
            assert not deps & shells, (room, deps & shells)


def test_one_name_for_one_job() -> None:
    """The broker's user check (transport/broker_users.py) and HTCondor's authorization policy
    (security/authz.py) are two jobs with two names."""
    assert sorted(p.relative_to(PKG).as_posix() for p in PKG.rglob("authz.py")) == ["security/authz.py"]


def test_no_two_test_modules_share_a_name() -> None:
    """pytest imports the test files by their base name (rootdir with no packages under tests/): two of the
    same name stop the whole collection."""
    names: dict[str, list[str]] = {}
    for path in (PKG.parent / "tests").rglob("*.py"):
        if path.name != "conftest.py" and "container" not in path.parts:
            names.setdefault(path.name, []).append(str(path.relative_to(PKG.parent)))
    assert {n: ps for n, ps in names.items() if len(ps) > 1} == {}
