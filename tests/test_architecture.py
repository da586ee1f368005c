"""The shape of ``gateway/``: no import cycle, and the layers only import downwards.

The import graph is read from the source (``ast``, nothing is imported): every ``import gateway…``
and ``from gateway… import`` / ``from . import`` of every module, at module level or inside a
function (a lazy import still runs, so it still ties the two modules). An import under
``if TYPE_CHECKING:`` is kept apart: it costs nothing at run time, so it may close a loop (a
type-only cycle), but it is still a dependency, so it counts for the layers.

The layers, lowest first, are ``LAYERS`` below. A module imports its own layer and the ones under
it; an import of a higher layer is the kind of tie that turns into a cycle, so there is at most
``UPWARD_ALLOWED`` of them (each one named in ``KNOWN_UPWARD`` with why). A new module gets a
layer here, or this test names it.

A loop closed only by an import inside a function (it runs once every module has loaded) is named
in ``KNOWN_CYCLES`` with why; a loop at import time is never allowed.

Run as a script (``python tests/test_architecture.py [gateway-dir]``) it prints the figures, for
any checkout (a ``main`` measured before a change, say).
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

GATEWAY = Path(__file__).resolve().parent.parent / "gateway"

# Lowest first. A name stands for the module and everything under it (``dialects`` is every codec;
# ``gateway`` is only the package's own ``__init__``). The wings (the packages under ``gateway/``) are
# the layers: a wing imports its own layer and the ones under it, never one above, so the package
# graph has no circle either (``test_no_package_cycle``).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    # the shared values and wire primitives every wing reads; the top-level modules that import nothing above them
    ("core", ("gateway", "errors", "events", "ir", "reply", "token_estimate", "asgi", "body_encoding", "random_ids")),
    ("framing", ("framing", "store")),  # bytes into frames; what outlives a request (knows no request)
    ("dialects", ("dialects",)),  # every dialect question is its codec's, with the vocabulary they share
    ("http", ("http",)),  # the HTTP/1.1 client, its pool, its httpx transport, and the demo stand-in transport
    ("config", ("settings",)),  # the configuration reads the registry (dialect lists) and the demo's defaults
    ("platforms", ("platforms",)),
    ("upstream", ("upstream",)),  # providers (client + auth + platform) and the event source over their answers
    ("routing", ("routing",)),
    ("telemetry", ("telemetry",)),
    ("governance", ("governance",)),
    ("guardrails", ("guardrails",)),  # redact / block / log personal data on the IR and the event union
    ("relay", ("relay",)),  # the pipeline of one request, and the state it is handed
    ("endpoints", ("endpoints",)),
    ("console", ("console",)),
    ("mcp", ("mcp",)),  # the MCP gateway: /mcp over the [[mcp_servers]], per-key tools, accounting
    ("server", ("server", "__main__")),
]

# At most this many modules at the top of gateway/ (``__init__`` included): the rest is in a wing.
TOP_LEVEL_MAX = 12

# A loop closed only by an import inside a function (it runs when called, after every module
# loaded): still a tie to undo, so each one is named here with why; an import-time loop is never allowed.
KNOWN_CYCLES: list[set[str]] = []  # none today

UPWARD_ALLOWED = 1
KNOWN_UPWARD: set[tuple[str, str]] = set()  # (importer, imported), each with its reason; none today


@dataclass(frozen=True, slots=True)
class Import:
    source: str
    target: str
    runtime: bool  # False: under ``if TYPE_CHECKING:``
    line: int
    lazy: bool = False  # inside a function: runs when it is called, not when the module loads


def modules(root: Path = GATEWAY) -> dict[str, Path]:
    """Every module under ``root`` by dotted name (a package by its ``__init__``)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(name: str, path: Path, known: dict[str, Path]) -> list[Import]:
    """The gateway modules ``name`` imports. ``from a import b`` is an import of ``a.b`` when that
    is a module, else of ``a``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[Import] = []

    def resolve(dotted: str) -> str | None:
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    def add(target: str | None, runtime: bool, line: int, lazy: bool) -> None:
        if target is not None and target != name:
            found.append(Import(name, target, runtime, line, lazy))

    def visit(node: ast.AST, runtime: bool, lazy: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child.test):
                for stmt in child.body:
                    visit_one(stmt, False, lazy)
                for stmt in child.orelse:
                    visit_one(stmt, runtime, lazy)
            else:
                visit_one(child, runtime, lazy)

    def visit_one(node: ast.AST, runtime: bool, lazy: bool) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "gateway":
                    add(resolve(alias.name), runtime, node.lineno, lazy)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module.split(".")[0] != "gateway":
                return
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                add(sub if sub in known else resolve(module), runtime, node.lineno, lazy)
        else:
            visit(node, runtime, lazy or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(ast.parse(path.read_text(encoding="utf-8")), True, False)
    return found


def import_graph(root: Path = GATEWAY) -> list[Import]:
    known = modules(root)
    return [imp for name, path in known.items() for imp in imports_of(name, path, known)]


def cycles(edges: list[Import]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    graph: dict[str, list[str]] = {}
    for imp in edges:
        graph.setdefault(imp.source, []).append(imp.target)
        graph.setdefault(imp.target, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(graph[succ])))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def layer_of(module: str) -> int | None:
    """The layer of ``module``: the longest name in ``LAYERS`` that is it or a package holding it."""
    best: tuple[int, int] | None = None  # (length of the matching name, layer)
    for number, (_, names) in enumerate(LAYERS):
        for short in names:
            if short == "gateway":  # the package's own __init__, not everything under it
                if module == "gateway":
                    return number
                continue
            full = f"gateway.{short}"
            if (module == full or module.startswith(full + ".")) and (best is None or len(full) > best[0]):
                best = (len(full), number)
    return None if best is None else best[1]


def upward(edges: list[Import]) -> list[Import]:
    """Imports of a higher layer than the importer's (type-only ones too: a dependency all the same)."""
    found = []
    for imp in edges:
        low, high = layer_of(imp.source), layer_of(imp.target)
        if low is not None and high is not None and high > low:
            found.append(imp)
    return found


def _pairs(edges: list[Import]) -> set[tuple[str, str]]:
    return {(imp.source, imp.target) for imp in edges}


def test_every_module_has_a_layer() -> None:
    assert [name for name in modules() if layer_of(name) is None] == []


def test_no_import_time_cycle() -> None:
    at_load = [imp for imp in import_graph() if imp.runtime and not imp.lazy]
    assert cycles(at_load) == []


def test_no_runtime_cycle_but_the_known_ones() -> None:
    """Function-level imports included: only the loops ``KNOWN_CYCLES`` names."""
    runtime = [imp for imp in import_graph() if imp.runtime]
    assert [c for c in cycles(runtime) if set(c) not in KNOWN_CYCLES] == []


def test_no_type_only_cycle_either() -> None:
    """With the ``TYPE_CHECKING`` imports too: a type-only loop is where the next runtime one comes from."""
    assert [c for c in cycles(import_graph()) if set(c) not in KNOWN_CYCLES] == []


def test_at_most_one_upward_import() -> None:
    ups = _pairs(upward(import_graph()))
    assert len(ups) <= UPWARD_ALLOWED, sorted(ups)
    assert ups <= KNOWN_UPWARD, sorted(ups - KNOWN_UPWARD)


def wing_of(module: str) -> str:
    """The node of ``module`` in the package graph: its wing (``gateway.relay`` for
    ``gateway.relay.attempts``), or the module itself when it sits at the top of ``gateway/``."""
    parts = module.split(".")
    if len(parts) > 2 or (len(parts) == 2 and (GATEWAY / parts[1]).is_dir()):
        return ".".join(parts[:2])
    return module


def package_graph(edges: list[Import]) -> list[Import]:
    """The imports between wings (and top-level modules), one edge per importing line."""
    return [
        Import(wing_of(imp.source), wing_of(imp.target), imp.runtime, imp.line, imp.lazy)
        for imp in edges
        if wing_of(imp.source) != wing_of(imp.target)
    ]


def top_level_modules(root: Path = GATEWAY) -> list[str]:
    return sorted(path.stem for path in root.glob("*.py"))


def test_no_package_cycle() -> None:
    """The wings are layers: no circle between packages, type-only imports counted."""
    assert cycles(package_graph(import_graph())) == []


def test_few_modules_at_the_top() -> None:
    assert len(top_level_modules()) <= TOP_LEVEL_MAX, top_level_modules()


def report(root: Path = GATEWAY) -> None:
    edges = import_graph(root)
    runtime = [imp for imp in edges if imp.runtime]
    at_load = [imp for imp in runtime if not imp.lazy]
    for label, graph in (
        ("import time", at_load),
        ("runtime, function-level imports too", runtime),
        ("with TYPE_CHECKING too", edges),
    ):
        found = cycles(graph)
        print(f"cycles ({label}): {len(found)} components, {sum(map(len, found))} modules")
        for component in found:
            print("   ", " ".join(component))
    ups = sorted(_pairs(upward(edges)))
    ups_runtime = sorted(_pairs(upward(runtime)))
    print(f"upward imports: {len(ups)} (runtime: {len(ups_runtime)})")
    for source, target in ups:
        print(f"    {source} -> {target}" + ("" if (source, target) in ups_runtime else "  (type only)"))
    wings = cycles(package_graph(edges))
    print(f"package cycles: {len(wings)}" + "".join(f"\n    {' '.join(c)}" for c in wings))
    print(f"modules at the top of gateway/: {len(top_level_modules(root))}")
    unplaced = [name for name in modules(root) if layer_of(name) is None]
    if unplaced:
        print("no layer:", " ".join(unplaced))


if __name__ == "__main__":
    report(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else GATEWAY)
