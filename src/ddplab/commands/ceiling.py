"""Measure this machine's copy ceiling: device-to-device copy bandwidth (the bytes once, and read
plus written) and host-to-device and device-to-host, the bound that collectives on one device run under.

`ddplab ceiling`: the loopback ceiling of the report's section 3.2 (measurements/ceiling.py says how)."""

from __future__ import annotations

from .. import display
from ..measurements import ceiling
from ..records import Report
from . import options

SUMMARY = ceiling.SUMMARY
EXAMPLES = (  # shown by --help (commands.help_epilog)
    ("ddplab ceiling", "copies of the default size"),
    ("ddplab ceiling --bytes 4G", "copies of 4 GiB"),
)


def render(report: Report, console) -> None:
    r = report.results
    display.failures(r.session, console)
    if r.device_copy is None:
        console.print(f"verdict: {display.verdict_text(report.verdict)}")
        return
    d = r.device_copy
    rows = [("device copy", f"{d.gbps:.1f} GB/s copy rate (bytes counted once), {d.rw_gbps:.1f} GB/s memory "
                            f"traffic (read + written); {d.size_bytes} B, median of {d.iters} ({d.method})")]
    for copy, label in ((r.host_to_device, "host -> device"), (r.device_to_host, "device -> host")):
        if copy is not None:
            rows.append((label, f"{copy.gbps:.1f} GB/s (pinned, {copy.size_bytes} B, {copy.method})"))
    console.print(display.kv_table("Loopback ceiling (GB = 1e9 bytes)", rows))
    console.print(f"verdict: {display.verdict_text(report.verdict)} - {ceiling.summary(r)}")


add_arguments, config_from_args, validate, main = options.measurement_command(ceiling, render)
