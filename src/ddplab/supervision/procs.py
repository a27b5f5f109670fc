"""Which processes `ddplab clean` may end, and which it only shows (the rules and why: docs/processes.md).

An orphan is a process that a launcher marked, tied to a run it started, AND whose launcher is provably gone. The
evidence is the real parent, read from /proc: never a pid carried in the environment (it belongs to another PID
namespace), never "the parent is pid 1" (containers run torchrun as pid 1). A ddplab rank's launcher lives while a
visible process has the identity (pid, start ticks) it wrote into the rank's environment; a torchrun worker's
while its parent is an elastic agent, or while a launcher of its run that started before it may live (a helper a
worker detached is re-parented to init while its agent lives). A dataloader worker shares its parent's verdict.
No evidence: never an orphan.

Every other process holding device memory or a device node is shown by program name only (arguments can carry
secrets), and ended only when the user names it (`ddplab clean --pid N`).
"""

from __future__ import annotations

import contextlib
import glob
import os
import time
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

import psutil

from ..platform import DeviceMonitor
from .proc_facts import ELASTIC_WORKER_ENV, INTERPRETERS, TORCHRUN_MARKER, Facts, snapshot
from ..records.clean import CleanRecord, Ended, GoneProcess, Orphan, OtherProcess, Survey
from ..basics.rundir import LAUNCHER_PID_ENV, LAUNCHER_START_ENV, RUN_DIR_ENV, RUN_ID_ENV
from ..basics.validators import is_digits
from .reaping import terminate_then_kill

# Launcher marker variable -> which launcher set it. ddplab's comes first: its ranks may carry both.
MARKERS = ((RUN_ID_ENV, "ddplab"), (TORCHRUN_MARKER, "torchrun"))
ELASTIC_AGENT_PROGRAMS = ("torchrun", "torch.distributed.run", "torch.distributed.launch")
# Run ids that name no run: torchrun's default --rdzv-id ("none", the same for every job started without one), and
# what a hand-made environment says instead of an id.
PLACEHOLDER_RUN_IDS = frozenset({"none", "null", "default", "unknown", "0"})
SAME_PROCESS_SLACK_S = 0.005  # start times are whole clock ticks (10 ms): another process differs by one


# ---------------------------------------------------------------------------------------------
# The decision: pure, over a snapshot


@dataclass(frozen=True)
class OrphanVerdict:
    """Whether one process is an orphan of a ddplab or torchrun run, and the evidence in words."""

    orphan: bool
    reason: str
    run_id: str | None = None


def marker(p: Facts) -> tuple[str, str] | None:
    """(launcher kind, run id) of the launcher that marked this process, if any."""
    for key, kind in MARKERS:
        if p.markers.get(key):
            return kind, p.markers[key]
    return None


def classify(pid: int, table: Mapping[int, Facts], _depth: int = 0) -> OrphanVerdict:
    """Is ``pid`` an orphan, with the evidence in words either way."""
    p = table[pid]
    mark = marker(p)
    if mark is None:
        return OrphanVerdict(False, "no launcher marked it")
    kind, run_id = mark
    untied = _not_tied_to_a_run(p, kind, run_id)
    if untied:
        return OrphanVerdict(False, f"{kind} marker of run {run_id!r}, {untied}: no evidence", run_id)
    parent = table.get(p.ppid)
    if parent is None or parent.start_ticks is None:  # ppid 0, or it vanished while we read it
        return OrphanVerdict(False, f"{kind} process of run {run_id}; its parent is outside this PID namespace or "
                              "unreadable: no evidence", run_id)
    if marker(parent) == mark:  # a worker's own child (a dataloader worker): judged with the worker
        if _depth >= 64:
            return OrphanVerdict(False, f"{kind} process of run {run_id} under too deep a tree: no evidence", run_id)
        up = classify(parent.pid, table, _depth + 1)
        return OrphanVerdict(up.orphan, f"child of pid {parent.pid} of the same run: {up.reason}", run_id)
    if kind == "ddplab":
        return _ddplab_rank(p, parent, table, run_id)
    return _torchrun_worker(p, parent, table, run_id)


def _not_tied_to_a_run(p: Facts, kind: str, run_id: str) -> str | None:
    """Why ``p``'s marker ties it to no run a launcher started (None: it does), in words."""
    if run_id.strip().lower() in PLACEHOLDER_RUN_IDS:
        return "a placeholder (torchrun's default --rdzv-id is 'none'): it names no run"
    if kind == "torchrun":
        missing = [name for name in ELASTIC_WORKER_ENV if name not in p.markers]
        return f"without {', '.join(missing)}, which elastic's agent gives every worker" if missing else None
    if p.run_dir_holds != run_id:
        where = p.markers.get(RUN_DIR_ENV) or "(none named)"
        return f"its run directory {where} does not hold that run (removed, or never ddplab's)"
    launcher = _launcher_identity(p)
    if launcher is not None and p.start_ticks is not None and p.same_clock and launcher[1] > p.start_ticks:
        return "its recorded launcher started after it"
    return None


def _ddplab_rank(p: Facts, parent: Facts, table: Mapping[int, Facts], run_id: str) -> OrphanVerdict:
    launcher = _launcher_identity(p)
    if launcher is None:
        return OrphanVerdict(False, f"ddplab rank of run {run_id} without a recorded launcher start time (an older "
                              "ddplab): no evidence", run_id)
    if not p.same_clock:
        return OrphanVerdict(False, f"ddplab rank of run {run_id} in another time namespace: start times do not "
                              "compare: no evidence", run_id)
    alive = next((q for q in (parent, *table.values()) if _has_identity(q, launcher)), None)  # the parent first
    if alive is not None:
        return OrphanVerdict(False, f"ddplab rank of run {run_id}; its launcher (pid {alive.pid}) is alive", run_id)
    return OrphanVerdict(True, f"ddplab rank of run {run_id}; its launcher (pid {launcher[0]} in its PID namespace) is "
                         f"gone: re-parented to pid {parent.pid} ({parent.program})", run_id)


def _launcher_identity(p: Facts) -> tuple[int, int] | None:
    pid, ticks = p.markers.get(LAUNCHER_PID_ENV, ""), p.markers.get(LAUNCHER_START_ENV, "")
    return (int(pid), int(ticks)) if is_digits(pid) and is_digits(ticks) else None


def _has_identity(q: Facts, launcher: tuple[int, int]) -> bool:
    pid, ticks = launcher
    return q.start_ticks == ticks and (q.ns_pid is None or q.ns_pid == pid)


def _torchrun_worker(p: Facts, parent: Facts, table: Mapping[int, Facts], run_id: str) -> OrphanVerdict:
    if is_elastic_agent(parent):
        return OrphanVerdict(False, f"torchrun worker of run {run_id}; its elastic agent (pid {parent.pid}) is alive",
                       run_id)
    if _is_namespace_init(parent) and not _may_be_launcher(parent):
        # Re-parented to init: its parent is gone, but that parent may have been a worker that detached it
        # (`setsid nohup helper &`), not the agent. The agent is gone only when nothing says it lives.
        alive_because = _launcher_may_live(p, run_id, table)
        if alive_because:
            return OrphanVerdict(False, f"torchrun process of run {run_id}, re-parented to init (pid {parent.pid}); "
                                  f"{alive_because}", run_id)
        return OrphanVerdict(True, f"torchrun worker of run {run_id}; its agent is gone: re-parented to init "
                             f"(pid {parent.pid}, {parent.program}) and no launcher of its run is alive", run_id)
    return OrphanVerdict(False, f"torchrun worker of run {run_id}; its parent pid {parent.pid} ({parent.program}) may "
                          "be a launcher running elastic as a library: no evidence", run_id)


def _launcher_may_live(p: Facts, run_id: str, table: Mapping[int, Facts]) -> str | None:
    """Why the launcher of ``p``'s torchrun run may still be alive (None: nothing says so), in words: a launcher
    that started before ``p`` and is the parent of a live process of its run, or an elastic agent without workers
    now (its run cannot be told), or a process of the run whose parent is outside this PID namespace."""
    children: dict[int, list[Facts]] = {}
    for q in table.values():
        children.setdefault(q.ppid, []).append(q)
    for q in table.values():
        if q.pid != p.pid and q.markers.get(TORCHRUN_MARKER) == run_id and q.ppid not in table:
            return f"process {q.pid} of its run has its parent outside this PID namespace: no evidence"
    for launcher in sorted(table.values(), key=lambda q: q.pid):
        if launcher.pid == p.pid or launcher.markers.get(TORCHRUN_MARKER) == run_id or \
                not _started_before(launcher, p) or not _may_be_launcher(launcher):
            continue
        runs = {q.markers.get(TORCHRUN_MARKER) for q in children.get(launcher.pid, ())} - {None}
        if run_id in runs:
            return f"the launcher of its run (pid {launcher.pid}, {launcher.program}) is alive"
        if not runs and is_elastic_agent(launcher):
            return (f"an elastic agent without workers now (pid {launcher.pid}, {launcher.program}), started before "
                    "it, is alive: it may be its run's")
    return None


def _started_before(a: Facts, b: Facts) -> bool:
    """``a`` started no later than ``b``, or their start times cannot be compared (then it may have)."""
    if a.start_ticks is None or b.start_ticks is None or not (a.same_clock and b.same_clock):
        return True
    return a.start_ticks <= b.start_ticks


def is_elastic_agent(p: Facts) -> bool:
    return any(os.path.basename(a) in ELASTIC_AGENT_PROGRAMS for a in p.argv[:3])


def _is_namespace_init(p: Facts) -> bool:
    return p.ns_pid == 1 if p.ns_pid is not None else p.pid == 1


def _may_be_launcher(p: Facts) -> bool:
    # A Python pid 1 may be the user's own launcher calling elastic as a library (a container's
    # `python train.py`): its workers are its children, not orphans.
    return is_elastic_agent(p) or p.program.startswith(INTERPRETERS)


# ---------------------------------------------------------------------------------------------
# What `clean`, `env` and `run` report (records/clean.py)


def survey(monitor: DeviceMonitor | None = None, device_node_globs: Sequence[str] = ()) -> Survey:
    """Orphans and the other processes holding the device: what `env`, `run` and `clean` all ask."""
    device_mem = monitor.sample().process_mem_bytes if monitor else {}
    device_nodes = {os.path.realpath(p) for g in device_node_globs for p in glob.glob(g)}
    table = snapshot()
    me, now = os.getpid(), time.time()
    orphans, others = [], []
    for pid, p in sorted(table.items()):
        if pid == me:
            continue
        verdict = classify(pid, table)
        holds_node = _holds_device_node(pid, device_nodes)
        if verdict.orphan:
            orphans.append(Orphan(pid=pid, ppid=p.ppid, create_time=p.create_time, age_s=_age(p.create_time, now),
                                  cmdline=p.program, device_mem_bytes=device_mem.get(pid), run_id=verdict.run_id,
                                  reason=verdict.reason))
        elif pid in device_mem or holds_node:
            others.append(_other(p, device_mem.get(pid), holds_node, verdict.reason, now))
    for pid in sorted(set(device_mem) - set(table) - {me}):  # the device reports a pid /proc does not show
        others.append(OtherProcess(pid=pid, user=None, program=None, create_time=None, age_s=None,
                                   device_mem_bytes=device_mem[pid], holds_device_node=False,
                                   not_orphan_because="not visible in this PID namespace (the device reports "
                                                      "pids of the host's namespace)"))
    return Survey(orphans, others)


def _other(p: Facts, mem: int | None, holds_node: bool, why: str, now: float) -> OtherProcess:
    return OtherProcess(pid=p.pid, user=p.user, program=p.program, create_time=p.create_time,
                        age_s=_age(p.create_time, now), device_mem_bytes=mem, holds_device_node=holds_node,
                        not_orphan_because=why)


def _age(create_time: float, now: float) -> float:
    return round(max(0.0, now - create_time), 1)


def _holds_device_node(pid: int, device_nodes: set[str]) -> bool:
    if not device_nodes:
        return False
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") in device_nodes:
                return True
        except OSError:
            continue
    return False


def describe(pid: int, found: Survey) -> Orphan | OtherProcess | None:
    """The process the user named (`clean --pid`), as the survey saw it or read now; None if gone."""
    for entry in (*found.orphans, *found.other_processes):
        if entry.pid == pid:
            return entry
    table = snapshot()
    if pid not in table:
        return None
    return _other(table[pid], None, False, classify(pid, table).reason, time.time())


def refuse_to_name(pid: int) -> str | None:
    """Why ``pid`` may not be named for ending (None: it may): pid 1, ddplab itself and its ancestors."""
    if pid <= 1:
        return "the init process" if pid == 1 else "not a pid"
    me = psutil.Process()
    if pid == me.pid:
        return "ddplab itself"
    with contextlib.suppress(psutil.Error):
        if pid in {p.pid for p in me.parents()}:
            return "an ancestor of this ddplab process (ending it would end this command)"
    if not psutil.pid_exists(pid):
        return "not a running process"
    return None


def end(targets: Sequence[Orphan | OtherProcess], grace_s: float = 5.0) -> Ended:
    """SIGTERM exactly these processes, SIGKILL what is left after ``grace_s``; a pid whose start time changed
    since the listing (reused) is refused, not signalled."""
    procs, refused = [], []
    for t in targets:
        try:
            p = psutil.Process(t.pid)
            if t.create_time is None or abs(p.create_time() - t.create_time) > SAME_PROCESS_SLACK_S:
                refused.append(t.pid)
                continue
            procs.append(p)
        except psutil.NoSuchProcess:
            continue
    terminated, killed, survived = terminate_then_kill(procs, grace_s)
    return Ended(terminated=sorted(p.pid for p in terminated), killed=sorted(p.pid for p in killed),
                 survived=sorted(p.pid for p in survived), refused=sorted(refused))


def clean(pid: int | None, yes: bool, grace_s: float) -> CleanRecord:
    """`ddplab clean`: survey the machine; with ``yes`` end the orphans (or the process ``pid``) and check the device
    gave their memory back. A pid that may not be named is refused (UsageError) first."""
    from ..errors import UsageError
    from ..platform import detect, open_monitor

    if pid is not None:
        why = refuse_to_name(pid)
        if why:
            raise UsageError("refused-pid", f"--pid {pid} is {why}; valid: the pid of another running "
                                            "process, e.g. one `ddplab clean` lists")
    platform = detect(with_memory=False)
    monitor = open_monitor(platform.spec)
    try:
        found = survey(monitor, platform.spec.device_node_globs)
        named = None if pid is None else describe(pid, found) or GoneProcess(pid)
        record = CleanRecord(survey=found, named=named, platform=platform)
        targets = record.targets
        if not (yes and targets):
            return record
        _stop_leftover_daemons(targets, platform.spec)
        ended = end(targets, grace_s)
        held = still_holding(monitor, [t.pid for t in targets])
        return replace(record, ended=ended, memory_returned=not held if monitor.api else None,
                       memory_still_held=held)
    finally:
        monitor.close()


def _stop_leftover_daemons(targets, vendor) -> None:
    """A private sharing daemon an earlier ddplab left (marked with its run id, its launcher gone) is stopped through
    its own pipe first, as its launcher would have (platform/sharing_daemon.py); `end` takes what is left."""
    from ..platform import sharing_daemon

    for target in targets:
        if os.path.basename((getattr(target, "cmdline", None) or "").split(" ")[0]) not in \
                vendor.sharing_daemon_processes:
            continue
        try:
            environ = psutil.Process(target.pid).environ()
        except psutil.Error:
            continue
        sharing_daemon.stop_leftover(vendor, environ)


def still_holding(monitor: DeviceMonitor, pids: Sequence[int], wait_s: float = 5.0) -> dict[int, int]:
    """Device memory still held by ``pids`` after up to ``wait_s`` (the driver frees it a little after the process)."""
    deadline = time.monotonic() + wait_s
    while True:
        mem = monitor.sample().process_mem_bytes
        held = {p: mem[p] for p in pids if mem.get(p)}
        if not held or time.monotonic() > deadline:
            return held
        time.sleep(0.2)

