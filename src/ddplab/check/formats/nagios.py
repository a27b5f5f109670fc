"""Nagios plugin output (the Nagios plugin development guidelines, also read by Icinga, Naemon, Sensu and
Meta's GCM-style runners): exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN, and

    DDPLAB CRITICAL - <what is wrong> | 'label'=value[UOM];[warn];[crit];[min];[max] ...
    CRITICAL: <one problem per line> (long output, after the first line)

Perfdata carries every number a check judged with the warning and critical levels it was judged against, in the
guidelines' range format (a floor w is "w:", alert below it; a ceiling w is "w", alert above it); a number no
check judged (the copy ceiling, the storm's mean where a latency bound replaced the storm's own line) has none.
The duration's max is the check's --deadline. Bandwidths have no unit of measure the guidelines allow (s, us,
ms, %, B, KB, MB, TB, c), so their labels say GBps and the value is bare.
"""

from __future__ import annotations

from ..record import CheckRecord, Reading, Status
from . import injected_note, one_line

PREFIX = "DDPLAB"
UOM = {"us": "us", "s": "s", "": ""}  # others: unitless, named in the label
# A check's key -> its perfdata label, where the label predates the key: graphs keep their history.
LABELS = {"storm.mean_all_reduce_latency": "latency.mean"}


def status_text(status: Status, summary: str, injected: list[str] = ()) -> str:
    return f"{PREFIX} {status.label} - {one_line(summary)}{injected_note(injected)}"


def render(record: CheckRecord) -> str:
    first = status_text(record.status, record.summary, record.injected)
    perf = " ".join(perfdata(record))
    lines = [f"{first} | {perf}" if perf else first]
    lines += [f"{c.status.label}: {one_line(c.message)}" for c in record.problems()]
    return "\n".join(lines)


def unknown(message: str) -> str:
    """The line for a check that could not judge the node (bad usage, cannot run here, a bug)."""
    return status_text(Status.UNKNOWN, message)


def perfdata(record: CheckRecord) -> list[str]:
    judged = [(LABELS.get(c.key, c.key), c.reading) for c in record.node_checks if c.reading is not None]
    out = [_entry(label, reading) for label, reading in judged]
    labels = {label for label, _ in judged}
    m = record.metrics
    if m.latency is not None and "latency.mean" not in labels:
        out.append(_entry("latency.mean", Reading(m.latency.mean_us, "us")))
    if m.copy_ceiling_gbps is not None and "baseline.copy_ceiling" not in labels:
        out.append(_entry("copy_ceiling", Reading(m.copy_ceiling_gbps, "GB/s", floor=True)))
    if m.wrong_elements is not None:
        out.append(_entry("wrong_elements", Reading(float(m.wrong_elements), "", critical=0.0)))
    if m.leftover_processes is not None:
        out.append(_entry("leftover_processes", Reading(float(m.leftover_processes), "", critical=0.0)))
    if record.duration_s is not None:
        out.append(_entry("duration", Reading(record.duration_s, "s"), maximum=record.deadline_s))
    return out


def _entry(key: str, r: Reading, maximum: float | None = None) -> str:
    uom = UOM.get(r.unit)
    label = (key if uom is not None else f"{key}_{r.unit.replace('/', 'p')}").replace("'", "").replace("=", "-")
    levels = [_range(v, r.floor) for v in (r.warning, r.critical)]
    top = number(maximum) if maximum is not None else ""
    return f"'{label}'={number(r.value)}{uom or ''};{levels[0]};{levels[1]};0;{top}"


def _range(value: float | None, floor: bool) -> str:
    if value is None:
        return ""
    return f"{number(value)}:" if floor else number(value)


def number(value: float) -> str:
    """A plain decimal (the guidelines' grammar has no exponents): up to 6 decimals, trailing zeros dropped."""
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text
