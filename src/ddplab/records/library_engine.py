"""The engines a storm or a sweep times a collective through, as records: ``BindingStatus`` (whether the vendor's
binding imports here and which copy of the library its calls reach), ``LibraryEngineRecord`` (what the library engine
called) and ``AddedCost`` (what torch adds per call at one size, with ``--engine both``); the --engine option and
the rows that judge them. Whether the library engine can run here is the launcher's (platform/library_engine.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..basics.cli_options import option
from .core import Check, Verdict
from .figures import LineChart, Series, Table

TORCH, LIBRARY, BOTH = "torch", "library", "both"
ENGINES = (TORCH, LIBRARY, BOTH)
# A library-engine row's op carries this prefix, so that `compare` lines up each engine with its own kind.
LIBRARY_PREFIX = "library:"


def engine_option():
    """The ``engine`` field of the storm's and the sweep's Config (--engine), written into a report only when it
    is not torch, so that a torch report keeps its keys. Its docstring, the help, is each Config's."""
    return option("--engine", default=TORCH, choices=ENGINES, json={"omit_default": True})


@dataclass(frozen=True)
class BindingStatus:
    """Whether the library engine can run here (platform/library_binding.py answers it)."""

    name: str | None  # None: the vendor has no binding
    importable: bool
    reason: str  # why not, or what was found
    hint: str | None = None
    binding_version: str | None = None
    library_version: str | None = None  # of the library the binding's calls reach
    library_path: str | None = None
    same_library_as_framework: bool | None = None  # None: one of the two paths is unknown
    substitute: str | None = None  # DDPLAB_LIBRARY_BINDING, when a test put its own adapter in

    def describe(self) -> str:
        """One line for the terminal: what the binding calls, and whether it is the copy torch's calls bind to."""
        if not self.importable:
            return self.reason + (f" ({self.hint})" if self.hint else "")
        same = {True: "the copy torch's calls bind to", False: "NOT the copy torch's calls bind to",
                None: "whether torch's calls bind to the same copy is unknown"}[self.same_library_as_framework]
        return f"importable: {self.reason}; {same}" + (f" (substitute {self.substitute})" if self.substitute else "")


@dataclass(frozen=True)
class LibraryEngineRecord:
    """What the library engine called: the binding, and the environment its communicators were made with
    beyond the placement's (e.g. the library's multi-rank switch where the policy chose gloo for torch)."""

    binding: BindingStatus
    env: dict[str, str]
    method: str
    warnings: list[str] = field(default_factory=list)  # e.g. ranks time-slicing a shared device


@dataclass(frozen=True)
class AddedCost:
    """One timing of one size through both engines, back to back on the same buffers."""

    op: str
    size_bytes: int
    in_place: bool
    timing: str  # which number of each engine: "pipelined", "blocking", "per-op p50", ...
    torch_us: float
    library_us: float
    added_us: float  # torch - library: what the framework adds per call
    share: float  # added / torch: the part of torch's time the framework itself takes


def added_cost(op: str, size_bytes: int, in_place: bool, timing: str, torch_us: float,
               library_us: float) -> AddedCost:
    added = torch_us - library_us
    return AddedCost(op, size_bytes, in_place, timing, torch_us, library_us, added,
                     added / torch_us if torch_us > 0 else 0.0)


def added_cost_figures(stage: str, rows: list[AddedCost], what: str) -> list:
    """The added cost as the HTML report shows it: a table of every row and, with several sizes, both engines'
    time per call against size, one line per collective and engine."""
    if not rows:
        return []
    table = Table(f"added-cost-{stage}", "What the framework adds per call",
                  f"{stage}: {what}; torch engine - library engine, back to back on the same buffers",
                  ["collective", "size (B)", "placement", "timing", "torch (us)", "library (us)", "added (us)",
                   "share of torch's time"],
                  [[r.op, str(r.size_bytes), "in" if r.in_place else "out", r.timing, f"{r.torch_us:.2f}",
                    f"{r.library_us:.2f}", f"{r.added_us:+.2f}", f"{100 * r.share:.1f} %"] for r in rows])
    if len({r.size_bytes for r in rows}) < 2:
        return [table]
    series: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        place = "in" if r.in_place else "out"
        series.setdefault(f"{r.op} {place} torch", []).append((float(r.size_bytes), r.torch_us))
        series.setdefault(f"{r.op} {place} library", []).append((float(r.size_bytes), r.library_us))
    chart = LineChart(f"engines-{stage}", "What the framework adds per call",
                      f"{stage}: time per call through torch and through the library alone ({what})",
                      "message size", "time per call",
                      [Series(label, points) for label, points in sorted(series.items())], log_x=True, log_y=True,
                      x_unit="bytes", y_unit="us")
    return [chart, table]


def label(record) -> str:
    """Who made a record's calls: the process group's backend, or the library engine's binding beside it."""
    backend = record.session.backend
    if record.engine != LIBRARY:
        return backend
    name = record.library.binding.name if record.library is not None else "its binding"
    return f"library engine {name} (process group {backend})"


def library_checks(library: LibraryEngineRecord) -> list[Check]:
    """Which library the engine called, and a warning for the setup it ran in, if any."""
    rows = [binding_check(library)]
    if library.warnings:
        rows.append(Check("library engine setup", Verdict.WARN, "; ".join(library.warnings), "none",
                          "the library engine ran, but not in the setup this machine does best",
                          "let ddplab use the sharing daemon (no --no-mps), or give each rank its own device"))
    return rows


def binding_check(library: LibraryEngineRecord) -> Check:
    """Which library the engine's calls reached: a copy other than torch's makes the comparison one of two
    libraries, not of the framework's cost."""
    status = library.binding
    other = status.same_library_as_framework is False
    return Check("library engine", Verdict.WARN if other else Verdict.PASS, status.describe(),
                 "the copy torch's calls bind to", library.method,
                 "load one copy of the library (check LD_PRELOAD and `ddplab env`)" if other else "none")


def added_cost_check(rows: list[AddedCost]) -> list[Check]:
    """Informational: what torch adds per call, at the smallest and at the largest size timed (the first row of
    each, in the record's order); every row is in the table."""
    if not rows:
        return []
    smallest, largest = min(rows, key=lambda r: r.size_bytes), max(rows, key=lambda r: r.size_bytes)
    value = _cost_text(smallest)
    if largest.size_bytes != smallest.size_bytes:
        value += f"; {_cost_text(largest)}"
    if len(rows) > 2:
        value += f" ({len(rows)} rows: the added-cost table)"
    return [Check("framework's added cost per call", Verdict.INFO, value, "informational",
                  "torch engine time - library engine time, back to back on the same buffers: what the framework "
                  "adds to each call", "none")]


def _cost_text(r: AddedCost) -> str:
    return (f"{r.op} {r.size_bytes} B ({r.timing}): torch {r.torch_us:.2f} us, library {r.library_us:.2f} us, "
            f"torch adds {r.added_us:+.2f} us ({100 * r.share:.0f} %)")
