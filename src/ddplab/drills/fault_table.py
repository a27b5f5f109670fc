"""The fault table (issue 17): every way a rank can fail, each run for real through `ddplab launch` (the path a
user's job takes), and judged against what is right: detected within the hang timeout + 5 s, the culprit rank
and kind right (or no culprit where none is right), nothing left running, the exit code as documented.

    python scripts/fault_table.py --ranks 2,3,4 --repeat 3 --out docs/results/fault-table

Each case is the drill script (drills/script.py) with one fault, injected by the victim itself or from outside
(a signal to the victim, or to the launcher). The victim is a middle rank where there is one (rank 1 of 3,
rank 2 of 4), never always the last. The tests (tests/integration/test_fault_table.py) run every row once.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import reaping

DETECT_SLACK_S = 5.0
READY_COLLECTIVES = 3
FAULT_AT = re.compile(r"\[rank (\d+)\] injecting fault: .* at (\d+\.\d+)")
HELPER_PID = re.compile(r"started pid (\d+)")


@dataclass(frozen=True)
class Case:
    """One row: the fault, where it goes in, and what is right."""

    name: str
    words: str  # the row's name in the table
    fault: str = "none"  # drills/script.py --fault
    outside: str | None = None  # SIGKILL | SIGSTOP to the victim; launcher-SIGKILL | launcher-SIGINT
    kind: str | None = None  # the culprit's kind; None: no culprit is right
    everyone: bool = False  # every rank is to blame (a command that fails at once everywhere)
    outcome: str = "failed"  # failed | hung | interrupted | (none: the launcher was killed)
    # A rank that leaves while the others wait in a collective: gloo's waiting ranks fail at once (their sockets
    # close), NCCL's wait on until ddplab declares the hang (measured on one H200, docs/fault-table.md).
    or_hung: bool = False
    exit_code: int | None = 1
    script: tuple[str, ...] = ()  # more arguments for the script
    no_python: tuple[str, ...] = ()  # --no-python: the command instead of the script


CASES = (
    Case("skip", "skip (stops issuing collectives, exits 0)", "skip", kind="behind", or_hung=True),
    Case("skip_continue", "skip and continue (one collective short)", "skip_continue", kind="behind", or_hung=True,
         script=("--steps", "20")),  # a job of 20 steps: it ends one collective short, where the others wait
    Case("mismatch", "size mismatch", "mismatch", kind="desync", or_hung=True),
    Case("raise", "raise", "raise", kind="raised"),
    Case("exit", "os._exit(3)", "exit", kind="died"),
    Case("segv", "SIGSEGV", "segv", kind="died"),
    Case("sigkill", "SIGKILL from outside", outside="SIGKILL", kind="died"),
    Case("sigstop", "SIGSTOP of a rank", outside="SIGSTOP", kind="frozen", outcome="hung"),
    Case("late", "sleep before init", "late", kind="never-reached-init", outcome="hung"),
    Case("deadlock", "deadlock in user code outside collectives", "deadlock", kind="behind", outcome="hung"),
    Case("syntax", "SyntaxError at start", "syntax", kind="failed-at-start"),
    Case("bin_false", "--no-python /bin/false", kind="failed-at-start", everyone=True, no_python=("false",)),
    Case("grandchild_term", "grandchild that ignores SIGTERM", "grandchild_term", kind="raised"),
    Case("grandchild_session", "grandchild in its own session", "grandchild_session", kind="raised"),
    Case("launcher_sigkill", "SIGKILL of the launcher", "helper", outside="launcher-SIGKILL", outcome="",
         exit_code=-signal.SIGKILL),
    Case("ctrl_c", "Ctrl+C (ranks ignore SIGTERM)", "helper", outside="launcher-SIGINT", outcome="interrupted",
         exit_code=130, script=("--ignore-sigterm",)),
    # elastic ends the ranks with SIGTERM for the stop before the watcher's next poll: no rank is to blame
    Case("ctrl_c_plain", "Ctrl+C", outside="launcher-SIGINT", outcome="interrupted", exit_code=130),
)
BY_NAME = {c.name: c for c in CASES}


def victim_of(nproc: int) -> int:
    """A middle rank where there is one: 1 of 2, 1 of 3, 2 of 4."""
    return max(1, nproc // 2)


@dataclass
class Run:
    """One run of one case, and how it went against what is right."""

    case: str
    nproc: int
    victim: int
    hang_timeout_s: float
    exit_code: int | None = None
    outcome: str | None = None
    culprit_ranks: list[int] | None = None
    culprit_kind: str | None = None
    culprit_reason: str | None = None
    fault_at: float | None = None
    detected_at: float | None = None
    detect_s: float | None = None
    left_running: list[int] = field(default_factory=list)
    ended_after: int = 0
    wall_s: float = 0.0
    failures: list[str] = field(default_factory=list)  # empty: the row is right

    @property
    def right(self) -> bool:
        return not self.failures


def run_case(case: Case, nproc: int, out: Path, hang_timeout_s: float = 5.0) -> Run:
    """``case`` with ``nproc`` ranks, once, through `python -m ddplab launch`; judged."""
    victim = victim_of(nproc)
    job = out / f"{case.name}-{nproc}"
    command = [sys.executable, "-m", "ddplab", "launch", "--nproc-per-node", str(nproc), "--hang-timeout",
               str(hang_timeout_s), "--out", str(job)]
    if case.no_python:
        command += ["--no-python", *case.no_python]
    else:
        command += ["-m", "ddplab.drills.script", "--fault", case.fault, "--victim", str(victim), "--steps",
                    "100000", "--fault-step", "5", "--late-s", "120", *case.script]
    started = time.time()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True)
    record = Run(case.name, nproc, victim, hang_timeout_s)
    try:
        if case.outside:
            record.fault_at = _inject_outside(case, proc, job, victim, nproc)
        output, _ = proc.communicate(timeout=hang_timeout_s + 180)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        record.failures.append("the launcher did not end within the hang timeout + 180 s")
    record.wall_s = round(time.time() - started, 2)
    if case.no_python:
        record.fault_at = started  # the command fails as it starts
    record.exit_code = proc.returncode
    _judge(case, record, job, output)
    return record


def _inject_outside(case: Case, proc: subprocess.Popen, job: Path, victim: int, nproc: int) -> float | None:
    """Wait until every rank issued a few collectives, then signal the victim or the launcher."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if _all_running(job, nproc):
            break
        time.sleep(0.05)
    else:
        return None
    at = time.time()
    if case.outside.startswith("launcher-"):
        os.kill(proc.pid, getattr(signal, case.outside.removeprefix("launcher-")))
    else:
        pid = int((job / "pids" / str(victim)).read_text())
        os.kill(pid, getattr(signal, case.outside))
    return at


def _all_running(job: Path, nproc: int) -> bool:
    for rank in range(nproc):
        try:
            state = json.loads((job / "ranks" / str(rank) / "status.json").read_text())
        except (OSError, ValueError):
            return False
        progress = state.get("progress") or {}
        if max((p.get("enqueued", 0) for p in progress.values()), default=0) < READY_COLLECTIVES:
            return False
    return True


def _judge(case: Case, record: Run, job: Path, output: str) -> None:
    said = [float(t) for _, t in FAULT_AT.findall(output)]
    if record.fault_at is None and said:
        record.fault_at = min(said)
    if record.fault_at is None:
        record.failures.append("the fault never went in")
    helpers = [int(p) for p in HELPER_PID.findall(output)]
    try:
        run_id = (job / "run-id").read_text().strip()
    except OSError:
        run_id = None
    record.left_running = reaping.leaked(run_id, helpers)  # alive 3 s (LEAK_WAIT_S) after the launcher ended
    if record.left_running:
        record.failures.append(f"left running: {record.left_running}")
    if record.exit_code != case.exit_code:
        record.failures.append(f"exit code {record.exit_code}, expected {case.exit_code}")
    if case.outside == "launcher-SIGKILL":
        return  # no report: the launcher was killed; what is judged is that nothing outlived it
    try:
        results = json.loads((job / "report.json").read_text())["results"]
    except (OSError, ValueError, KeyError):
        record.failures.append("no report")
        return
    culprit = results.get("culprit") or {}
    record.outcome = results.get("outcome")
    record.culprit_ranks, record.culprit_kind = culprit.get("ranks"), culprit.get("kind")
    record.culprit_reason = culprit.get("reason")
    record.detected_at = results.get("detected_at")
    record.ended_after = len(results.get("ended_after") or [])
    if record.outcome != case.outcome and not (case.or_hung and record.outcome == "hung"):
        record.failures.append(f"outcome {record.outcome}, expected {case.outcome}")
    _judge_culprit(case, record, results)
    if record.detected_at is not None and record.fault_at is not None:
        record.detect_s = round(record.detected_at - record.fault_at, 2)
        if record.detect_s > record.hang_timeout_s + DETECT_SLACK_S:
            record.failures.append(f"detected {record.detect_s} s after the fault")
    elif case.kind is not None:
        record.failures.append("never detected")
    if case.fault.startswith("grandchild") and record.ended_after < 1:
        record.failures.append("the rank's helper was not ended by ddplab")


def _judge_culprit(case: Case, record: Run, results: dict) -> None:
    if case.kind is None:
        if record.culprit_ranks:
            record.failures.append(f"culprit {record.culprit_ranks} named where none is right")
        return
    if record.culprit_kind != case.kind:
        record.failures.append(f"culprit kind {record.culprit_kind}, expected {case.kind}")
    if case.everyone:
        ranks = {r["rank"]: r for r in results.get("ranks") or []}
        wrong = [r for r in record.culprit_ranks or [] if not str(ranks.get(r, {}).get("ended_by", "")).startswith(
            "exit ")]
        if not record.culprit_ranks or wrong:
            record.failures.append(f"culprits {record.culprit_ranks}: each must be a rank that failed on its own")
    elif record.culprit_ranks != [record.victim]:
        record.failures.append(f"culprit {record.culprit_ranks}, expected [{record.victim}]")


def table(runs: list[Run]) -> str:
    """The table in Markdown: one row per case and rank count, with how many of its repetitions were right."""
    lines = ["| fault | ranks (victim) | right | culprit named (kind) | detected after the fault (s) | left | "
             "exit |", "|---|---|---|---|---|---|---|"]
    for case in CASES:
        for nproc in sorted({r.nproc for r in runs if r.case == case.name}):
            mine = [r for r in runs if r.case == case.name and r.nproc == nproc]
            right = sum(r.right for r in mine)
            named = sorted({f"{r.culprit_ranks} ({r.culprit_kind})" if r.culprit_ranks is not None else "none"
                            for r in mine})
            detect = [r.detect_s for r in mine if r.detect_s is not None]
            detected = f"{min(detect)}-{max(detect)}" if detect else "-"
            left = max(len(r.left_running) for r in mine)
            exits = sorted({str(r.exit_code) for r in mine})
            lines.append(f"| {case.words} | {nproc} ({mine[0].victim}) | {right} of {len(mine)} | "
                         f"{', '.join(named)} | {detected} | {left} | {', '.join(exits)} |")
    return "\n".join(lines)


def to_json(runs: list[Run]) -> list[dict]:
    return [{**asdict(r), "right": r.right} for r in runs]
