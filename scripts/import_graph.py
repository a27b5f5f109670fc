"""The import graph of src/ddplab: each module's room and layer, its circles and its upward imports.

    python scripts/import_graph.py [--quiet]

Prints every module with its layer and the ddplab modules it imports (imports inside functions and under
``if TYPE_CHECKING`` count: an edge hidden in a function is still an edge; so does a string that names a module
whole, as a registry's or ``importlib.import_module``'s), then the circles (strongly connected components of more
than one module) and the upward imports (a module importing one of a higher layer). Exit 1 if there is either, or
if there are more rooms or top-level modules than the limits below.

A room is a folder (a package directly under ddplab) or a module at the top level. LAYERS, bottom to top, is the
one table of the layers, by room; docs/architecture.md draws it. A module may import its own layer and the ones
below.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"

# Bottom to top, by room: a folder under ddplab (all its modules), or a top-level module ("__init__" is the package).
LAYERS: list[tuple[str, list[str]]] = [
    # Helpers everything may use: errors, files, the run directory, the option machinery, /proc; the collectives'
    # definitions (buffers and formulas).
    ("basics", ["__init__", "errors", "basics", "collectives"]),
    # Plain data: what crosses a module boundary and what a report holds, the shared launch options included.
    ("records", ["records"]),
    # The one place that knows vendors: what the machine is, device operations, the library's own binding.
    ("platform", ["platform"]),
    # Views of records alone: the HTML page and its drawing, the terminal.
    ("report", ["report"]),
    # Jobs across machines: where a job listens and meets, what the launcher told a process, the job's store.
    ("cluster", ["cluster"]),
    # Watching any job's ranks and judging how they ended; the processes of a run and what is left of them.
    ("supervision", ["supervision"]),
    # The ranks' side of each measurement.
    ("workloads", ["workloads"]),
    # One supervised job: the lab's session and its ranks' entry, the user's job under `ddplab launch`.
    ("job", ["job"]),
    # The fault drills.
    ("drills", ["drills"]),
    # What ddplab measures and how it judges it.
    ("measurements", ["measurements"]),
    # `ddplab run`: a profile's stages into one report; the orphan sweep.
    ("lab", ["lab"]),
    # `ddplab check`, and reading any report back (the catalog reads a check's; a check reads its baseline).
    ("check and reading", ["check", "reading"]),
    ("the CLI", ["commands", "cli", "__main__"]),
]
MOST_ROOMS = 25
MOST_TOP_LEVEL_MODULES = 5

# Imports still owed to a change in files another change owns. Each is named with what removes it; the test fails
# once one is gone, so it is struck here too.
OWED: dict[tuple[str, str], str] = {}


def modules(src: Path = SRC) -> dict[str, Path]:
    """Every module of the ddplab package by dotted name (a package by its own name, for its __init__.py)."""
    found = {}
    for path in sorted((src / "ddplab").rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The module a dotted name lands in: itself, or the nearest package above it (``pkg.attr`` -> ``pkg``)."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The ddplab modules one module imports, anywhere in its text."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            # `from pkg import sub` imports the module pkg.sub when there is one, else a name of pkg.
            names = [f"{origin}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in known:
            names = [node.value]
        for name in names:
            target = _resolve(name, known)
            if target is not None and target != module:
                found.add(target)
    return found


def graph(src: Path = SRC) -> dict[str, set[str]]:
    known = modules(src)
    return {module: imports_of(module, path, known) for module, path in known.items()}


def room_of(module: str) -> str:
    """The folder directly under ddplab that holds a module, or the top-level module's own name."""
    parts = module.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


def rooms(src: Path = SRC) -> tuple[set[str], set[str]]:
    """(every room, the top-level modules): the packages directly under ddplab and its own modules."""
    top = {path.stem for path in (src / "ddplab").glob("*.py")}
    return top | {path.parent.name for path in (src / "ddplab").glob("*/__init__.py")}, top


def layer_of(module: str) -> int:
    room = room_of(module)
    for level, (_, names) in enumerate(LAYERS):
        if room in names:
            return level
    raise KeyError(f"{module} is in no layer: add its room {room!r} to LAYERS in scripts/import_graph.py")


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
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
    return sorted(found)


def upward(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, imported) where the imported module's layer is above the importer's."""
    return sorted((a, b) for a, targets in edges.items() for b in targets if layer_of(b) > layer_of(a))


def without_owed(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    return {a: {b for b in targets if (a, b) not in OWED} for a, targets in edges.items()}


def main(argv: list[str]) -> int:
    everything = graph()
    edges = without_owed(everything)
    if "--quiet" not in argv:
        for level, (name, _) in enumerate(LAYERS):
            print(f"== layer {level}: {name}")
            for module in sorted(m for m in edges if layer_of(m) == level):
                shown = [f"{b} (owed)" if (module, b) in OWED else b for b in sorted(everything[module])]
                print(f"{module} -> {', '.join(shown) or '(nothing)'}")
    found_circles, found_upward = circles(edges), upward(edges)
    all_rooms, top = rooms()
    print(f"{len(edges)} modules, {sum(len(t) for t in edges.values())} imports, "
          f"{len(found_circles)} circles, {len(found_upward)} upward imports, {len(all_rooms)} rooms "
          f"(at most {MOST_ROOMS}), {len(top)} top-level modules (at most {MOST_TOP_LEVEL_MODULES})")
    for component in found_circles:
        print("circle: " + " <-> ".join(component))
    for a, b in found_upward:
        print(f"upward: {a} [{LAYERS[layer_of(a)][0]}] -> {b} [{LAYERS[layer_of(b)][0]}]")
    for (a, b), why in OWED.items():
        print(f"owed ({'still there' if b in everything.get(a, ()) else 'GONE: strike it from OWED'}): "
              f"{a} -> {b}: {why}")
    crowded = len(all_rooms) > MOST_ROOMS or len(top) > MOST_TOP_LEVEL_MODULES
    return 1 if found_circles or found_upward or crowded else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
