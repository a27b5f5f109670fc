"""The check as a library: run it (or judge a report already written), and write its report.

env first, as in the lab; where the environment cannot even be read (no such device here) nothing else runs and
the node is UNKNOWN. Then the check's stages through the lab's own stage runner (lab.run_stages: each stage
isolated, the leftover check after them), then the judgement. <out>/report.json (command "check") and
<out>/report.html hold everything; `ddplab report` draws the page again and `ddplab compare` lines two up.
"""

from __future__ import annotations

import contextlib
import time

from .. import lab, measurements
from ..profiles import Machine, Stage
from ..records import Report
from . import COMMAND, plan
from .config import CheckConfig
from .record import CheckRecord
from .inject import Leftover, apply_row_faults, wants_leftover
from .judge import Expectations, judge


def run(config: CheckConfig, console, expectations: Expectations) -> Report:
    if config.from_report:
        return judge_report(config, expectations)
    out = lab.claim_out_dir(config.out, COMMAND)
    started = time.monotonic()
    leftover = Leftover(f"check-injected-{out.name}") if wants_leftover(config.inject) else None
    with leftover or contextlib.nullcontext():
        records = []
        env_stage = Stage("env", "env", measurements.get("env").Config(device=config.device))
        env_report = lab.run_stage(records, env_stage, console)
        platform = env_report.platform if env_report else None
        stages = [] if env_report is None else plan.stages(Machine.of(platform, config.device), config.nproc, out,
                                                             config.stage_deadline_s, config.across())
        ran = lab.run_stages(config, stages, out, console, platform, records, started, first=[env_stage],
                             write=False)
        injected = _injected(config, leftover)
        record = judge(apply_row_faults(ran.results.stages, config.inject), platform, expectations,
                       interrupted=ran.results.interrupted, duration_s=round(time.monotonic() - started, 1),
                       out=str(out.resolve()), injected=injected)
    report = Report(command=COMMAND, config=ran.config, platform=platform, results=record,
                    verdict=record.status.verdict)
    lab.write_reports(report, out)
    return report


def judge_report(config: CheckConfig, expectations: Expectations) -> Report:
    """Judge the stages of a report already written (a check's or a lab run's): nothing runs."""
    from ..errors import UsageError
    from ..catalog import read_report

    source = read_report(config.from_report)
    if source.command not in ("check", "run"):
        raise UsageError("invalid-report", f"--from-report {config.from_report} is a ddplab {source.command} "
                                           "report; give the report of `ddplab check` or `ddplab run`")
    r = source.results
    earlier = list(r.injected) if isinstance(r, CheckRecord) else []  # a check's report keeps its faults: still said
    record = judge(apply_row_faults(r.stages, config.inject), source.platform, expectations,
                   interrupted=r.interrupted, duration_s=r.duration_s, out=r.out, from_report=config.from_report,
                   injected=earlier + _injected(config, None))
    return Report(command=COMMAND, config=config, platform=source.platform, results=record,
                  verdict=record.status.verdict)


def _injected(config: CheckConfig, leftover: Leftover | None) -> list[str]:
    return [leftover.describe() if spec == "leftover" and leftover is not None else spec for spec in config.inject]
