"""The launcher's side of the engines: whether the library engine can run here, decided before any rank starts,
and what the storm and the sweep report about it.

``--engine torch`` (the default) times torch.distributed; ``library`` calls the collective library directly through
the vendor's binding on the same buffers, with the same formulas, check and rows; ``both`` runs them back to back
and reports what the framework adds per call. The library engine follows the placement the policy chose, so the
shared-device costs can be shown without torch in the way. The ranks' side is workloads/callers.py.
"""

from __future__ import annotations

import importlib
from typing import Callable, Mapping

from ..basics.cli_options import option
from ..errors import EnvironmentUnsupported
from ..records import Check, Verdict
from ..records.library_engine import LIBRARY, TORCH, AddedCost, LibraryEngineRecord, added_cost

BOTH = "both"
ENGINES = (TORCH, LIBRARY, BOTH)


def engine_option():
    """The ``engine`` field of the storm's and the sweep's Config (--engine), written into a report only when it
    is not torch, so that a torch report keeps its keys. Its docstring, the help, is each Config's."""
    return option("--engine", default=TORCH, choices=ENGINES, json={"omit_default": True})

METHOD = ("the collective library called directly through the vendor's binding (platform/library_binding.py), "
          "its communicator made through the job's own c10d store, on the buffers torch's engine uses, with the "
          "same byte counts, formulas and exact-data check")


def prepare_library(engine: str, platform, placement, environ: Mapping[str, str] | None = None,
                    import_module: Callable = importlib.import_module) -> LibraryEngineRecord | None:
    """For ``library`` and ``both``: the binding, checked before any rank starts, or EnvironmentUnsupported (exit
    3) where it is missing, cannot reach its library or refuses the ranks' placement. None for the torch engine."""
    if engine not in (LIBRARY, BOTH):
        return None
    from .library_binding import open_binding, shared_device_env

    binding = open_binding(platform, environ, import_module)
    status = binding.available()
    if not status.importable:
        raise EnvironmentUnsupported("library-binding-unusable", status.reason, hint=status.hint)
    env = shared_device_env(platform, placement.shared_device, placement.env)
    added = {k: v for k, v in env.items() if placement.env.get(k) != v}
    return LibraryEngineRecord(binding=status, env=added, method=METHOD, warnings=setup_warnings(platform, placement))


def setup_warnings(platform, placement) -> list[str]:
    """Ranks sharing a device without the sharing daemon time-slice it: through the library too, every call pays
    a context switch (docs/shared-device.md). The torch engine may have gloo there; the library engine cannot."""
    rule = platform.spec.multi_rank
    daemon = rule.sharing_daemon if rule is not None else None
    if not placement.shared_device or platform.host_only or not daemon or placement.sharing_daemon is not None:
        return []
    measured = (f" ({rule.costs.without_daemon_us:,.1f} us per 4-byte all_reduce vs {rule.costs.with_daemon_us:,.1f} "
                f"us with it, measured on {rule.costs.measured_on})" if rule.costs else "")
    return [f"the library engine's ranks share a device without the {daemon} daemon: they time-slice it and every "
            f"call pays a context switch{measured}"]


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
    smallest = next(r for r in rows if r.size_bytes == min(x.size_bytes for x in rows))
    largest = next(r for r in rows if r.size_bytes == max(x.size_bytes for x in rows))
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


def row_costs(torch_rows, library_rows, timing: str) -> list[AddedCost]:
    """One AddedCost per size both engines timed (rows with ``timed_row()``: sweep rows)."""
    library = {t.key: t for t in (r.timed_row() for r in library_rows) if t is not None}
    out = []
    for row in torch_rows:
        mine = row.timed_row()
        theirs = library.get(mine.key) if mine is not None else None
        if theirs is not None:
            out.append(added_cost(mine.op, mine.size_bytes, mine.in_place, timing, mine.time_us, theirs.time_us))
    return out

