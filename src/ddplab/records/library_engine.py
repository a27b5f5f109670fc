"""The engines a storm or a sweep times a collective through, as records: ``BindingStatus`` (whether the vendor's
binding imports here and which copy of the library its calls reach), ``LibraryEngineRecord`` (what the library engine
called) and ``AddedCost`` (what torch adds per call at one size, with ``--engine both``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .figures import LineChart, Series, Table

TORCH, LIBRARY = "torch", "library"
# A library-engine row's op carries this prefix, so that `compare` lines up each engine with its own kind.
LIBRARY_PREFIX = "library:"


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
