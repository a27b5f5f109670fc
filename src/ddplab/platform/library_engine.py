"""The launcher's side of the engines: whether the library engine can run here, decided before any rank starts,
and what torch adds per call; the rows that judge them are records/library_engine.py's.

``--engine torch`` (the default) times torch.distributed; ``library`` calls the collective library directly through
the vendor's binding on the same buffers, with the same formulas, check and rows; ``both`` runs them back to back
and reports what the framework adds per call. The library engine follows the placement the policy chose, so the
shared-device costs can be shown without torch in the way. The ranks' side is workloads/callers.py.
"""

from __future__ import annotations

import importlib
from typing import Callable, Mapping

from ..errors import EnvironmentUnsupported
from ..records.library_engine import BOTH, LIBRARY, AddedCost, LibraryEngineRecord, added_cost

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

