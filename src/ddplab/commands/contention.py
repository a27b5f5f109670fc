"""Measure what sharing one device costs: several processes computing on it at once, against one
alone, as aggregate efficiency and each process's slowdown. Without --mps the processes time-slice the device;
unlike the other commands, contention never takes the sharing daemon unasked, because time slicing is what it
measures.
"""

from __future__ import annotations

from ..report import terminal
from ..measurements import contention
from ..records import Report
from . import options

SUMMARY = contention.SUMMARY
EXAMPLES = (  # shown by --help (commands.help_epilog)
    ("ddplab contention", "two processes on one device, time-sliced"),
    ("ddplab contention --nproc 4 --mps", "four processes through the MPS daemon"),
)


def render(report: Report, console) -> None:
    r = report.results
    session, s = r.session, r.summary
    terminal.failures(session, console)
    if s is not None:
        e = s.against_ideal
        where = (f"on the host CPU ({e.usable_cores} usable cores)" if e.ideal_basis == "cores" else
                 f"on one device ({'time slicing' if r.time_sliced else 'MPS'})")
        rows = [("processes", f"{session.world_size} {where}"),
                ("alone", f"{s.solo_tflops:.2f} TFLOP/s"),
                ("together, each", ", ".join(f"{x:.2f}" for x in s.together_tflops) + " TFLOP/s"),
                ("aggregate efficiency", contention.efficiency_text(r)),
                ("per-process slowdown", ", ".join(f"{x:.2f}x" for x in e.slowdown)),
                ("kernel", f"{s.matrix}x{s.matrix} {s.dtype} matmul; {s.method}")]
        console.print(terminal.kv_table("Contention", rows))
    console.print(f"verdict: {terminal.verdict_text(report.verdict)} - {contention.summary(r)}")


add_arguments, config_from_args, validate, main = options.measurement_command(contention, render)
