"""The fault table: every way a rank can fail (``CASES``, injected by the victim or from outside), crossed with the
training code it fails in (``CODES``: plain DDP, DDP with no_sync, FSDP2, Lightning, Accelerate), each run for real
through `ddplab launch` and judged against what is right: detected within the hang timeout + 5 s, the culprit rank
and kind right, nothing left running, the exit code as documented. The victim is a middle rank where there is one.

    python scripts/fault_table.py --ranks 2,3,4 --repeat 3 --out docs/results/fault-table
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

from ..basics.rundir import RunDir
from ..supervision import reaping
from .child_launcher import wait_for_run
from .runner import DETECT_SLACK_S, wait_for_ranks

FAULT_AT = re.compile(r"\[rank (\d+)\] injecting fault: .* at (\d+\.\d+)")
HELPER_PID = re.compile(r"started pid (\d+)")


# code -> the module and options it runs with (`ddplab launch ... -m MODULE OPTIONS`)
CODES = {
    "ddp": ("ddplab.drills.script",),
    "ddp_no_sync": ("ddplab.drills.script", "--accumulate", "4"),
    "fsdp2": ("ddplab.drills.script", "--wrap", "fsdp2"),
    "lightning": ("ddplab.drills.lightning_job",),
    "accelerate": ("ddplab.drills.accelerate_job",),
}
DDP = ("ddp",)
TRAINING = tuple(CODES)


@dataclass(frozen=True)
class Case:
    """One row: the fault, where it goes in, the codes it runs on, and what is right."""

    name: str
    words: str  # the row's name in the table
    fault: str = "none"  # drills/faults.py --fault (drills/script.py's own on plain DDP)
    outside: str | None = None  # SIGKILL | SIGSTOP to the victim; launcher-SIGKILL | launcher-SIGINT | launcher-SIGHUP
    kind: str | None = None  # the culprit's kind; None: no culprit is right
    everyone: bool = False  # every rank is to blame (a command that fails at once everywhere)
    outcome: str = "failed"  # failed | hung | interrupted | succeeded | (none: the launcher was killed)
    # A rank that leaves while the others wait in a collective: gloo's waiting ranks fail at once (their sockets
    # close), NCCL's wait on until ddplab declares the hang.
    or_hung: bool = False
    exit_code: int | None = 1
    script: tuple[str, ...] = ()  # more arguments for the script
    no_python: tuple[str, ...] = ()  # --no-python: the command instead of the script
    codes: tuple[str, ...] = DDP  # the training codes it runs on
    kinds: tuple[str, ...] = ()  # other kinds that are right too, where the code decides how the fault shows
    victim: int | None = None  # the victim where it must be this rank (None: a middle rank, victim_of)
    # at two ranks both are named: the only evidence is one rank's word against the other's (a parameter mismatch)
    pair_at_two: bool = False


CASES = (
    # the faults users meet in training, on every code
    Case("stall", "stall in user code", "stall", kind="behind", outcome="hung", codes=TRAINING),
    Case("loader_stall", "stall in a DataLoader worker", "loader_stall", kind="behind", outcome="hung",
         codes=TRAINING),
    Case("uneven", "uneven inputs (one rank runs out of batches)", "uneven", kind="behind", or_hung=True,
         exit_code=1, codes=TRAINING),
    Case("exit0", "a rank exits 0 early (sys.exit(0))", "exit0", kind="behind", or_hung=True, codes=TRAINING),
    Case("exit", "os._exit(3)", "exit", kind="died", codes=TRAINING),
    Case("sigkill", "SIGKILL from outside", outside="SIGKILL", kind="died", codes=TRAINING),
    Case("segv", "SIGSEGV", "segv", kind="died", codes=TRAINING),
    Case("backward_raise", "raise inside backward (a hook)", "backward_raise", kind="raised", codes=TRAINING),
    # FSDP2 has no construction-time check of the model (docs/fault-table.md, known limits). DDP checks every rank
    # against rank 0: the rank that differs raises, or every other rank does where rank 0 is the one
    Case("param_mismatch", "parameter mismatch at DDP construction", "param_mismatch", kind="raised",
         codes=("ddp", "ddp_no_sync", "lightning", "accelerate"), pair_at_two=True),
    Case("param_mismatch_rank0", "parameter mismatch at DDP construction, on rank 0", "param_mismatch",
         kind="desync", codes=("ddp", "lightning"), victim=0, pair_at_two=True),
    Case("gil", "GIL held in C code", "gil", kind="frozen", outcome="hung", codes=TRAINING),
    # elastic ends the ranks with SIGTERM for the stop before the watcher's next poll: no rank is to blame
    Case("ctrl_c_plain", "Ctrl+C", outside="launcher-SIGINT", outcome="interrupted", exit_code=130, codes=TRAINING),
    # faults of a hand-written collective, and of the process, on plain DDP
    Case("skip", "skip (stops training, finishes its script early, exit 0)", "skip", kind="behind", or_hung=True),
    Case("skip_continue", "skip one gradient reduction and continue (one collective short)", "skip_continue",
         kind="behind", or_hung=True, script=("--steps", "20")),  # it ends one collective short, where the others wait
    Case("mismatch", "size mismatch (a metric all_reduce)", "mismatch", kind="desync", or_hung=True),
    Case("raise", "raise", "raise", kind="raised"),
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
    # the hostile cases: where the judge was once wrong and torchrun right, or slow
    Case("exit_before_broadcast", "os._exit before the others' first broadcast", "exit_before_broadcast",
         kind="died"),
    Case("kill_before_broadcast", "SIGKILL before the others' first broadcast", "kill_before_broadcast",
         kind="died"),
    Case("exit_then_raise", "os._exit(5) after a barrier, another rank raises 50 ms later", "exit_then_raise",
         kind="died"),
    Case("abort", "os.abort() in its own code while the others wait in backward()", "abort", kind="died"),
    Case("abort_before_broadcast", "os.abort() before the others' first broadcast", "abort_before_broadcast",
         kind="died"),
    Case("exit_gil_hang", "hangs at exit holding the GIL, after the others finished", "exit_gil_hang",
         kind="frozen", outcome="hung", script=("--steps", "8")),
    Case("hang_in_import", "hung inside an import", "hang_in_import", kind="never-reached-init", outcome="hung"),
    Case("stop_in_import", "SIGSTOP inside an import", "stop_in_import", kind="frozen", outcome="hung"),
    Case("exec", "execs another program after init", "exec", kind="frozen", outcome="hung"),
    Case("gil_everywhere", "every rank computes 5 s per step in C holding the GIL (healthy)", "gil_everywhere",
         outcome="succeeded", exit_code=0, script=("--steps", "9")),
    Case("sighup", "SIGHUP (terminal closed)", outside="launcher-SIGHUP", outcome="interrupted", exit_code=130),
)
BY_NAME = {c.name: c for c in CASES}


def victim_of(nproc: int) -> int:
    """A middle rank where there is one: 1 of 2, 1 of 3, 2 of 4."""
    return max(1, nproc // 2)


@dataclass
class Run:
    """One run of one case in one training code, and how it went against what is right."""

    case: str
    nproc: int
    victim: int
    hang_timeout_s: float
    code: str = "ddp"
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


def run_case(case: Case, nproc: int, out: Path, hang_timeout_s: float = 5.0, code: str = "ddp") -> Run:
    """``case`` in training code ``code`` with ``nproc`` ranks, once, through `python -m ddplab launch`; judged."""
    victim = victim_of(nproc) if case.victim is None else case.victim
    job = out / (f"{case.name}-{nproc}" if code == "ddp" else f"{code}-{case.name}-{nproc}")
    command = [sys.executable, "-m", "ddplab", "launch", "--nproc-per-node", str(nproc), "--hang-timeout",
               str(hang_timeout_s), "--out", str(job)]
    if case.no_python:
        command += ["--no-python", *case.no_python]
    else:
        module, *options = CODES[code]
        command += ["-m", module, *options, "--fault", case.fault, "--victim", str(victim), "--steps", "100000",
                    "--fault-step", "5", "--late-s", "120", *case.script]
    started = time.time()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True)
    record = Run(case.name, nproc, victim, hang_timeout_s, code)
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
    """Wait until every rank issued a few collectives (as a drill waits), then signal the victim or the launcher."""
    run = wait_for_run(job, proc)
    pids = wait_for_ranks(run, nproc, ended=lambda: proc.poll() is not None) if run else {}
    if not pids or proc.poll() is not None:
        return None
    at = time.time()
    if case.outside.startswith("launcher-"):
        os.kill(proc.pid, getattr(signal, case.outside.removeprefix("launcher-")))
    else:
        os.kill(pids[victim], getattr(signal, case.outside))
    return at


def _judge(case: Case, record: Run, job: Path, output: str) -> None:
    said = [float(t) for _, t in FAULT_AT.findall(output)]
    if record.fault_at is None and said:
        record.fault_at = min(said)
    if record.fault_at is None:
        record.failures.append("the fault never went in")
    helpers = [int(p) for p in HELPER_PID.findall(output)]
    run = RunDir.existing(job)
    # alive 3 s (LEAK_WAIT_S) after the launcher ended
    record.left_running = reaping.leaked(run.run_id if run else None, helpers)
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
    kinds = ("desync",) if case.pair_at_two and record.nproc == 2 else (case.kind, *case.kinds)
    if record.culprit_kind not in kinds:
        record.failures.append(f"culprit kind {record.culprit_kind}, expected {' or '.join(kinds)}")
    if case.everyone:
        ranks = {r["rank"]: r for r in results.get("ranks") or []}
        wrong = [r for r in record.culprit_ranks or [] if not str(ranks.get(r, {}).get("ended_by", "")).startswith(
            "exit ")]
        if not record.culprit_ranks or wrong:
            record.failures.append(f"culprits {record.culprit_ranks}: each must be a rank that failed on its own")
    else:
        expected = [0, 1] if case.pair_at_two and record.nproc == 2 else [record.victim]
        if record.culprit_ranks != expected:
            record.failures.append(f"culprit {record.culprit_ranks}, expected {expected}")


def table(runs: list[Run]) -> str:
    """The table in Markdown: one row per case, code and rank count, with how many of its repetitions were right."""
    lines = ["| fault | code | ranks (victim) | right | culprit named (kind) | detected after the fault (s) | left | "
             "exit |", "|---|---|---|---|---|---|---|---|"]
    for case in CASES:
        for code in case.codes:
            for nproc in sorted({r.nproc for r in runs if r.case == case.name and r.code == code}):
                mine = [r for r in runs if r.case == case.name and r.code == code and r.nproc == nproc]
                right = sum(r.right for r in mine)
                named = sorted({f"{r.culprit_ranks} ({r.culprit_kind})" if r.culprit_ranks is not None else "none"
                                for r in mine})
                detect = [r.detect_s for r in mine if r.detect_s is not None]
                detected = f"{min(detect)}-{max(detect)}" if detect else "-"
                left = max(len(r.left_running) for r in mine)
                exits = sorted({str(r.exit_code) for r in mine})
                lines.append(f"| {case.words} | {code} | {nproc} ({mine[0].victim}) | {right} of {len(mine)} | "
                             f"{', '.join(named)} | {detected} | {left} | {', '.join(exits)} |")
    return "\n".join(lines)


def to_json(runs: list[Run]) -> list[dict]:
    return [{**asdict(r), "right": r.right} for r in runs]
