"""Run the latency storm: many tiny all_reduces in a row, with the mean latency as the lab report defines
it, the latency of each operation (p50, p99), the device time and each rank's CPU cost, judged against a
threshold for this setup.
"""

from __future__ import annotations

from ..report import terminal
from ..measurements import storm
from ..records import Report
from . import machines_view, options

SUMMARY = storm.SUMMARY
EXAMPLES = (  # shown by --help (commands.help_epilog)
    ("ddplab storm", "10,000 all_reduces of 4 bytes between two ranks"),
    ("ddplab storm --nproc 2 --mps", "two ranks sharing one GPU through the MPS daemon"),
    ("ddplab storm --engine both", "through torch and through the collective library itself, side by side"),
)


def render(report: Report, console) -> None:
    r = report.results
    session = r.session
    console.print(terminal.rank_table("Ranks", session.ranks))
    terminal.failures(session, console)
    if r.summary is None:
        console.print(f"verdict: {terminal.verdict_text(report.verdict)} - {storm.summary(r)}")
        return
    s = r.summary
    per, dev = s.per_op_us, s.device_us
    rows = [
        ("backend", f"{session.backend}: {session.backend_reason}"),
        ("mean latency (report's definition, synchronised)", f"{s.mean_us:.2f} us  (slowest rank "
                                                             f"{s.mean_us_max_rank:.2f} us)"),
        ("report's own script (no device sync)", f"{s.seed_method_us:.2f} us"),
        ("per op, blocking", f"p50 {per.p50:.2f}  p90 {per.p90:.2f}  p99 {per.p99:.2f}  max {per.max:.2f} us  "
                             f"(n={per.n})"),
        ("device time per op (events)", f"p50 {dev.p50:.2f}  p99 {dev.p99:.2f} us" if dev else "n/a (host)"),
        ("mean - device p50", f"{s.mean_minus_device_us:.2f} us: bound by {s.bound_by}"
         if s.mean_minus_device_us is not None else "n/a"),
        ("CPU during the storm (worst rank)", f"user {s.cpu_user_pct_of_wall:.0f}%  system "
                                              f"{s.cpu_system_pct_of_wall:.0f}% of wall time"),
        ("device utilisation (max sampled)", f"{s.device_util_pct_max}%" if s.device_util_pct_max is not None
         else "n/a"),
        ("result correct", r.correct),
        ("threshold", f"{r.threshold_us:.0f} us: {r.threshold_reason}"),
        ("method", s.method),
        *_engine_rows(r),
    ]
    console.print(terminal.kv_table("Latency storm", rows))
    if r.added_cost:
        console.print(terminal.added_cost_table(r.added_cost))
    if r.machines is not None:  # a job across machines
        console.print(*machines_view.storm_tables(r.machines))
    terminal.footer(console, session, report.verdict, storm.summary(r))


def _engine_rows(r) -> list[tuple[str, object]]:
    """The library engine, when it ran: what it called and, beside torch, its own numbers (none for torch alone)."""
    if r.library is None:
        return []
    rows = [("engine", f"{r.engine}: {r.library.binding.describe()}")]
    if r.library.env:
        rows.append(("library engine environment", " ".join(f"{k}={v}" for k, v in r.library.env.items())))
    rows += [("library engine warning", w) for w in r.library.warnings]
    s = r.library_summary
    if s is not None:
        per = s.per_op_us
        rows += [("library engine mean latency", f"{s.mean_us:.2f} us  (slowest rank {s.mean_us_max_rank:.2f} us)"),
                 ("library engine per op, blocking", f"p50 {per.p50:.2f}  p90 {per.p90:.2f}  p99 {per.p99:.2f}  max "
                                                     f"{per.max:.2f} us  (n={per.n})"),
                 ("library engine result correct", r.library_correct)]
    return rows


add_arguments, config_from_args, validate, main = options.measurement_command(storm, render)
