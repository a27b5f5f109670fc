"""List orphaned ranks, processes a launcher marked whose launcher is provably gone, and with --yes end
exactly those (SIGTERM, then SIGKILL) and check that the device memory came back. Other processes on the device
are listed beside them and never ended, unless you name one with --pid.

Never by name: the report's `ps | grep python | xargs kill -9` kills every Python process on the machine. See
supervision/procs.py and docs/processes.md for the evidence an orphan needs.
"""

from __future__ import annotations

from ..lab import clean
from ..report import terminal
from ..records import Report, make_report
from ..records.clean import CleanRecord, GoneProcess, Orphan, OtherProcess
from ..basics.sizes import human_bytes
from . import options

SUMMARY = clean.SUMMARY
EXAMPLES = (  # shown by --help (commands.help_epilog)
    ("ddplab clean", "list the orphans; nothing is ended"),
    ("ddplab clean --yes", "end exactly the orphans listed"),
    ("ddplab clean --pid 4242 --yes", "end the one process you named"),
)


def render(report: Report, console) -> None:
    r: CleanRecord = report.results
    if r.named is not None:
        _render_named(r.named, console)
    else:
        _render_orphans(r.survey.orphans, console)
        render_other_processes(r.survey.other_processes, console)
    if r.ended is None:
        if r.named is not None and not isinstance(r.named, GoneProcess):
            console.print(f"nothing ended: run `ddplab clean --pid {r.named.pid} --yes` to end it")
        elif r.named is None and r.survey.orphans:
            console.print("nothing ended: run `ddplab clean --yes` to end exactly the orphans listed")
    else:
        e = r.ended
        console.print(f"ended: {len(e.terminated)} by SIGTERM, {len(e.killed)} by SIGKILL, "
                      f"{len(e.survived)} survived (uninterruptible: the host may need a reboot)")
        if e.refused:
            console.print(f"not signalled: pid(s) {e.refused} started again since they were listed (pid reused)")
        if r.memory_returned is not None:
            console.print(f"device memory returned: {r.memory_returned}")
    console.print(f"verdict: {terminal.verdict_text(report.verdict)}")


def _render_orphans(orphans: list[Orphan], console) -> None:
    if not orphans:
        console.print("no orphaned processes")
        return
    console.print(terminal.kv_table("Orphaned processes (launcher gone)", [
        (str(o.pid), f"{o.cmdline}: age {o.age_s:.0f}s, device mem {human_bytes(o.device_mem_bytes)}; {o.reason}")
        for o in orphans]))


def render_other_processes(others: list[OtherProcess], console) -> None:
    """Shared with `env`: processes on the device that are not orphans."""
    if not others:
        return
    console.print(terminal.kv_table("Other processes on the device (never ended unless named: "
                                   "`ddplab clean --pid N --yes`)", [
        (str(o.pid), f"{o.program or '?'} (user {o.user or '?'}), device mem {human_bytes(o.device_mem_bytes)}, "
                     f"age {_age_text(o.age_s)}; {o.not_orphan_because}") for o in others]))


def _age_text(age_s: float | None) -> str:
    return "?" if age_s is None else f"{age_s:.0f}s"


def _render_named(named: Orphan | OtherProcess | GoneProcess, console) -> None:
    if isinstance(named, GoneProcess):
        console.print(f"pid {named.pid} is gone: nothing to end")
        return
    if isinstance(named, Orphan):
        program, user, why = named.cmdline, None, named.reason
    else:
        program, user, why = named.program, named.user, named.not_orphan_because
    console.print(terminal.kv_table(f"Named process {named.pid}", [
        ("program", program), ("user", user), ("age", _age_text(named.age_s)),
        ("device mem", human_bytes(named.device_mem_bytes)), ("launcher evidence", why)]))


add_arguments, config_from_args, validate, _ = options.measurement_command(clean, render)


def main(args, console) -> int:
    config = config_from_args(args)
    report = make_report(clean, config, clean.run(config))
    return options.finish(report, render, args, console)
