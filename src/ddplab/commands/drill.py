"""Reproduce a fault on purpose (a killed rank or launcher, Ctrl+C, a late, stalled, straggling,
desynchronised or out-of-memory rank, a lost machine), measure how the stack reacts, and show that ddplab's
supervision names the right rank and leaves nothing behind.

`ddplab drill NAME`: NAME is one of the drills in ddplab.drills (kill-rank and kill_rank both work), `all`, or
`short` (the set `ddplab run` uses).
"""

from __future__ import annotations

from dataclasses import replace

from rich.markup import escape

from ..report import terminal
from ..measurements import drill
from ..records import Report
from ..records.codec import to_json
from ..records.drill import DrillOutcome
from . import options

SUMMARY = drill.SUMMARY
EXAMPLES = (  # shown by --help (commands.help_epilog)
    ("ddplab drill kill_rank", "kill one rank and time the job's teardown"),
    ("ddplab drill short", "every drill that takes seconds"),
    ("ddplab drill kill_launcher --launcher torchrun",
     "what plain torchrun leaves behind when its launcher dies"),
)


def render(report: Report, console) -> None:
    r = report.results
    for outcome in r.drills:
        render_one(outcome, console)
    console.rule("drills")
    note = " (INTERRUPTED: partial report)" if r.interrupted else ""
    console.print(f"verdict: {terminal.verdict_text(report.verdict)}{note} - {escape(drill.summary(r))}")


def render_one(o: DrillOutcome, console) -> None:
    if o.error:
        console.print(f"[red]drill {o.drill} crashed:[/] {escape(o.error)}")
        return
    rows = [("injected", _injected_text(o)),
            ("detection", drill.detection(o)),
            ("culprit (ddplab)", f"{o.culprits_in_words() if o.culprit_ranks else 'none named'}"
                                 + (f": {o.culprit_reason}" if o.culprit_reason else "")),
            ("torchrun would blame", "no rank (none failed)" if o.torchrun_root_cause_rank is None
             else f"rank {o.torchrun_root_cause_rank}"),
            ("error excerpt", o.error_excerpt[-300:] or "none"),
            ("leaked processes", o.leaked_pids or "none"),
            ("device memory back after", _memory_text(o))]
    # The drill's own numbers, whatever they are (an open part when read back from JSON).
    rows += [(key.replace("_", " "), _short(terminal.text_of(value)))
             for key, value in (to_json(o.details) or {}).items()]
    if o.failed_because:
        rows.append(("failed because", "; ".join(o.failed_because)))
    console.print(terminal.kv_table(f"drill {o.drill}", rows))
    console.print(f"verdict: {terminal.verdict_text(o.verdict)} - expected: {escape(o.expect)}")


def _injected_text(o: DrillOutcome) -> str:
    inj = o.injected
    if inj is None:
        return "nothing (this drill injects no fault)"
    if not inj.went_in:
        return f"nothing went in (rank {inj.rank}" + (f", {inj.what} was planned)" if inj.what else ")")
    return f"{inj.what or 'a fault'} (rank {inj.rank})"


def _memory_text(o: DrillOutcome) -> str:
    if o.device_mem_before_bytes is None:
        return "not measured (no per-process memory API)"
    return f"{o.memory_back_s} s" if o.memory_back_s is not None else "never, within the wait"


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else f"...{text[-limit:]}"


add_arguments, config_from_args, validate, _ = options.measurement_command(drill, render)


def main(args, console) -> int:
    """The drills' runs, and their report, in one directory of this command's own: --run-dir (refused when it holds
    a run), else ./ddplab-runs/drill-<time>-<suffix>; each drill's launches under <dir>/<drill>/."""
    from ..basics.rundir import claim_new

    config = config_from_args(args)
    for name in config.drills:  # a --run-dir that holds a run is refused before it is claimed
        drill.check_drill_dir(config.launch.run_dir, name)
    path, _ = claim_new(config.launch.run_dir, "drill", "--run-dir")
    config = replace(config, launch=replace(config.launch, run_dir=str(path.resolve())))
    return options.run_measurement(drill, config, render, args, console)
