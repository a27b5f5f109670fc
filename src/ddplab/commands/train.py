"""Run DDP with several ranks, on one shared device or one rank per device, and prove that the gradients
were synchronised: each rank's gradient must equal a reference computed from every rank's batch, and the
parameters must be identical on every rank at the end.
"""

from __future__ import annotations

from ..report import terminal
from ..measurements import train
from ..records import Report
from . import machines_view, options

SUMMARY = train.SUMMARY
EXAMPLES = (  # shown by --help (commands.help_epilog)
    ("ddplab train", "two ranks on this machine's default device"),
    ("ddplab train --nproc 4 --per-device", "one rank on each of four devices"),
    ("ddplab train --model mlp --steps 100 --json train.json", "a larger model, longer, with a JSON report"),
)


def render(report: Report, console) -> None:
    r = report.results
    session = r.session
    console.print(terminal.rank_table("Ranks", session.ranks))
    terminal.failures(session, console)
    rows = [("backend", f"{session.backend}: {session.backend_reason}"),
            ("shared device", session.shared_device),
            ("parameters bit-identical across ranks", r.params_identical),
            ("averaged gradient == single-process reference", r.grad_matches_reference),
            ("local gradient differs (negative control)", r.local_grad_differs)]
    st = r.step_time_us
    if st.n:
        rows.append(("step time", f"p50 {st.p50:.1f} us, p99 {st.p99:.1f} us over {st.n} steps "
                                  f"({r.step_time_method})"))
    rows.append(("run directory", session.run_dir))
    console.print(terminal.kv_table("DDP train", rows))
    if r.machines is not None:  # a job across machines
        console.print(machines_view.ranks_table(r.machines))
    terminal.footer(console, session, report.verdict, train.summary(r))


add_arguments, config_from_args, validate, main = options.measurement_command(train, render)
