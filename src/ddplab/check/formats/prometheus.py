"""Prometheus exposition for node_exporter's textfile collector, written with prometheus_client to a temporary
file beside the target and renamed over it (write_to_textfile), so the collector never reads half a file.

Every gauge is made in ``registry_of`` with its help text: each check's and the node's status in Nagios' codes,
the machine type, every sweep row's busbw, the storm's latencies, the copy rate, wrong elements, leftover
processes, when the check ended (with --from-report: when the report's run ended), its duration, injected faults.
Names follow Prometheus' conventions as `promtool check metrics` lints them: base units in the name, gauges only,
and no label a summary reserves (the latency's statistic is ``stat``, never ``quantile``: one run's order
statistics, not streaming quantiles). The collector reads *.prom, so it ignores the temporary file.
"""

from __future__ import annotations

from pathlib import Path

from ... import __version__
from ...basics.files import make_directory
from ..record import CheckRecord

FILE_NAME = "ddplab_check.prom"
LATENCY_STATS = ("p50", "p90", "p99", "max")


def registry_of(record: CheckRecord):
    from prometheus_client import CollectorRegistry, Gauge

    reg = CollectorRegistry()

    def gauge(name: str, doc: str, labels=()):
        return Gauge(name, doc, labelnames=labels, registry=reg)

    status = gauge("ddplab_check_status", "Status of one check: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.",
                   ("check", "stage"))
    for c in record.node_checks:
        status.labels(check=c.key, stage=c.stage).set(c.status.code)
    gauge("ddplab_check_overall_status", "Status of the node: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.").set(
        record.status.code)
    if record.machine is not None:
        m = record.machine
        gauge("ddplab_check_info", "The machine type the check judged, and ddplab's version.",
              ("device", "device_count", "library", "ddplab_version")).labels(
            device=m.device, device_count=str(m.count), library=m.library, ddplab_version=__version__).set(1)
    metrics = record.metrics
    if metrics.busbw:
        busbw = gauge("ddplab_busbw_bytes_per_second", "Bus bandwidth of one sweep row (nccl-tests' busbw).",
                      ("op", "size_bytes", "placement"))
        for row in metrics.busbw:
            busbw.labels(op=row.op, size_bytes=str(row.size_bytes), placement=row.placement_words).set(
                row.busbw_gbps * 1e9)
    if metrics.latency is not None:
        lat = metrics.latency
        labels = dict(op=lat.op, size_bytes=str(lat.size_bytes))
        per_op = gauge("ddplab_latency_seconds", "The storm's blocking per-op latency, worst rank: p50, p90, p99, max.",
                       ("op", "size_bytes", "stat"))
        for stat in LATENCY_STATS:
            value = lat.quantile(stat)
            if value is not None:
                per_op.labels(**labels, stat=stat).set(value / 1e6)
        gauge("ddplab_latency_mean_seconds", "The storm's mean latency (pipelined, averaged over ranks).",
              ("op", "size_bytes")).labels(**labels).set(lat.mean_us / 1e6)
    if metrics.copy_ceiling_gbps is not None:
        gauge("ddplab_copy_ceiling_bytes_per_second", "Device copy rate, bytes counted once.").set(
            metrics.copy_ceiling_gbps * 1e9)
    if metrics.wrong_elements is not None:
        gauge("ddplab_sweep_wrong_elements", "Elements with wrong data over every sweep row.").set(
            metrics.wrong_elements)
    if metrics.leftover_processes is not None:
        gauge("ddplab_leftover_processes", "Orphaned ranks on the machine and processes the check left running.").set(
            metrics.leftover_processes)
    gauge("ddplab_check_last_run_timestamp_seconds", "When the check's stages ended, Unix time.").set(
        record.finished_unix)
    if record.duration_s is not None:
        gauge("ddplab_check_duration_seconds", "How long the check ran.").set(record.duration_s)
    if record.injected:
        gauge("ddplab_check_injected_faults", "Faults put into this check on purpose (a test).").set(
            len(record.injected))
    return reg


def render(record: CheckRecord) -> str:
    from prometheus_client import generate_latest

    return generate_latest(registry_of(record)).decode()


def write(record: CheckRecord, directory: str | Path) -> Path:
    """DIR/ddplab_check.prom, replaced at once."""
    from prometheus_client import write_to_textfile

    make_directory(Path(directory), "--textfile-dir")
    path = Path(directory) / FILE_NAME
    write_to_textfile(str(path), registry_of(record))
    return path
