"""What `ddplab compare` does, as a library: read two inputs, line up their timings, judge B ("new") against A.

An input is nccl-tests-style text (sweep rows) or any ddplab JSON report, read through the records; a report's
timings are its record's ``timed_rows(config)``, so a new measurement needs no change here. Rows match on (op, size,
in-place). A row of B slower than A beyond the tolerance is a regression; a size of B far off its own neighbours is
a spike instead (WARN). Two lab reports also compare their stages' verdicts.

What A timed and B did not is never passed over: a stage B lacks fails, and so does a row B did not time where B's
kind of input times that collective and placement; only a series B's tool never times (nccl-tests' out-of-place
all_reduce against torch's in-place one) is a warning.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import catalog
from ..measurements import spikes
from ..errors import UsageError
from ..records import Report, Verdict
from ..records.compare import (BaselineRows, CompareConfig, CompareRecord, ComparedRow, MissingRow, TimedRow,
                              VerdictChange, timed_rows_of)
from ..records.core import Staged

NAME = "compare"
SUMMARY = "side by side: nccl-tests text or ddplab JSON, with regressions beyond a tolerance"
Config, Record = CompareConfig, CompareRecord
checks = CompareRecord.checks  # the kind's hook (records.make_report) is the record's own


@dataclass(frozen=True)
class Input:
    path: str
    kind: str  # "ddplab" or "nccl-tests"
    rows: list[TimedRow]
    report: Report | None  # the ddplab report, when the input is one

    @property
    def label(self) -> str:
        return f"{self.kind} {self.path}"

    @property
    def source(self) -> str:
        """What made the rows: the ddplab command, or the nccl-tests family."""
        return self.report.command if self.report is not None else self.kind


def load_input(path: str) -> Input:
    """Read one input. A file that is neither a ddplab report nor nccl-tests output (binary, empty, broken
    JSON, a report of the wrong shape) is a UsageError naming the file and what is wrong with it."""
    data = catalog.read_bytes(path)
    if catalog.looks_like_json(data):
        report = catalog.parse_report(data, path)
        rows = timed_rows_of(report)
        if not rows:
            raise UsageError("nothing-timed", f"{path}: a ddplab {report.command} report with no timings")
        return Input(path, "ddplab", rows, report)
    if b"\0" in data:
        raise UsageError("unreadable-input", f"{path} is a binary file: neither a ddplab JSON report nor "
                                             f"nccl-tests output")
    from ..measurements import nccl_tests  # its table's records: for nccl-tests output alone

    table = nccl_tests.parse(data.decode("utf-8", errors="replace"))
    if not table.rows:
        raise UsageError("unreadable-input", f"{path}: neither a ddplab JSON report nor nccl-tests output "
                                             f"(no table rows found)")
    return Input(path, "nccl-tests", [t for t in (r.timed_row() for r in table.rows) if t is not None], None)


def load_baseline(path: str) -> BaselineRows:
    """A baseline the report page draws dashed beside its own lines, read as `compare` reads its A side."""
    found = load_input(path)
    return BaselineRows(found.label, found.rows)


def compare(config: CompareConfig, old: Input, new: Input) -> CompareRecord:
    """B against A; UsageError when they have nothing in common."""
    rows = line_up(old.rows, new.rows, config.tolerance, config.min_size)
    changes = verdict_changes(old.report, new.report)
    if not rows and not changes:
        raise UsageError("nothing-to-compare", f"no (collective, size, placement) appears in both {old.path} and "
                                               f"{new.path}")
    return CompareRecord(rows=rows, verdict_changes=changes, missing_stages=missing_stages(old.report, new.report),
                         missing_rows=missing_rows(old, new, config.min_size), config=config)


def line_up(old: list[TimedRow], new: list[TimedRow], tolerance: float, min_size: int) -> list[ComparedRow]:
    """Matched rows; a row that is a spike in B carries ``spike`` and is not counted as a regression."""
    index = {r.key: r for r in old}
    spiked = {x.key: x for x in spikes.find_spikes(new)}
    out = []
    for r in new:
        base = index.get(r.key)
        if base is None or not base.time_us or not r.time_us:
            continue
        change = r.time_us / base.time_us - 1
        spike = spiked.get(r.key)
        judged = r.size_bytes >= min_size
        out.append(ComparedRow(op=r.op, size_bytes=r.size_bytes, in_place=r.in_place, old_time_us=base.time_us,
                               new_time_us=r.time_us, old_busbw_gbps=base.busbw_gbps, new_busbw_gbps=r.busbw_gbps,
                               time_change=change, regression=judged and change > tolerance and spike is None,
                               new_wrong=bool(r.num_wrong), spike=spike is not None,
                               spike_factor=spike.factor if spike else None))
    return out


def verdict_changes(old: Report | None, new: Report | None) -> list[VerdictChange]:
    """Stages of two lab reports whose verdict got worse (a record with stages has ``stage_verdicts()``)."""
    before, after = _stage_verdicts(old), _stage_verdicts(new)
    return [VerdictChange(stage, before[stage], verdict) for stage, verdict in after.items()
            if stage in before and verdict.severity > before[stage].severity]


def missing_stages(old: Report | None, new: Report | None) -> list[str]:
    """Stages of lab report A that ran (not skipped) and that lab report B does not have."""
    before, after = _stage_verdicts(old), _stage_verdicts(new)
    if not before or not after:  # not two lab reports: their rows say what is missing
        return []
    return [stage for stage, verdict in before.items() if stage not in after and verdict != Verdict.SKIP]


def missing_rows(old: Input, new: Input, min_size: int) -> list[MissingRow]:
    """A's timed rows at judged sizes that B did not time, in A's order. A loss, unless B is another tool's or
    command's output that does not time that collective and placement at any size."""
    timed = {r.key for r in new.rows if r.time_us}
    series = {(op, in_place) for op, _, in_place in timed}
    same_source = old.source == new.source
    return [MissingRow(r.op, r.size_bytes, r.in_place, loss=same_source or (r.op, r.in_place) in series)
            for r in old.rows if r.time_us and r.size_bytes >= min_size and r.key not in timed]


def _stage_verdicts(report: Report | None) -> dict[str, Verdict]:
    return report.results.stage_verdicts() if report is not None and isinstance(report.results, Staged) else {}
