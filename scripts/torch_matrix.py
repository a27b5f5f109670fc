#!/usr/bin/env python3
"""ddplab on the torch releases users' clusters pin: a fresh virtual environment per release, then the lab and a
supervised job that goes wrong, and a JSON summary of what each did.

    python3 scripts/torch_matrix.py                       # the matrix of docs/RESULTS.md (about 10 minutes)
    python3 scripts/torch_matrix.py --torch 2.4.1 --strict --case rank_exception   # what CI runs (scripts/compat.sh)

For each release: `pip install torch==V <this checkout>` into ROOT/venv-V (PyPI's Linux wheels are CUDA builds and
bring their nvidia-* libraries; they run on the CPU), then, from a directory of its own,
- `ddplab run` (the quick profile): its exit code, verdict, stages and where its stores listened;
- `ddplab launch --nproc-per-node 2 --hang-timeout 5 -- examples/CASE.py` for every case: exit code, outcome, the
  rank named culprit against the one the example breaks (rank 1), where the job listened, what was left running.
With --refuse V, a release older than the floor is installed without its dependencies (only its version is read)
and `ddplab env` must refuse it: exit 3, one sentence.

The machine's pip cap (/etc/xdg/pip/constraints.txt caps torch on some machines) is lifted for these installs only
(PIP_CONSTRAINT=/dev/null). Only the standard library is used here: any python3 runs it. Each environment is removed
after its release unless --keep. --strict (CI): exit 1 when any check failed. The summary says which checkout ran.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MATRIX = ("2.4.1", "2.5.1", "2.7.1", "2.8.0", "2.9.1", "2.13.0", "newest")
CASES = ("skipped_collective", "user_deadlock", "rank_exception")
CULPRIT = [1]  # every example breaks rank 1 unless told otherwise (examples/_common.py, --victim)
HANG_TIMEOUT_S = 5
# `ddplab run`'s env stage judges the whole machine: another session's leftover would turn its verdict to WARN.
# Where the machine allows it (root, unshare), the lab runs in a PID namespace of its own, as the tests' do.
RUN_LIMIT_S = 300  # the quick profile takes 15 s on an idle 2-core machine, 70 s at load 7
LAUNCH_LIMIT_S = 120  # each case ends within a few seconds of its hang timeout
PID_NAMESPACE = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"]
PROBE = """
import json, torch, torch.distributed as dist
from torch._C import _distributed_c10d as c10d
print(json.dumps({"torch": torch.__version__, "cuda_build": torch.version.cuda,
                  "gloo_flight_recorder": hasattr(c10d, "_dump_fr_trace_json")}))
"""


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    deadline = time.monotonic() + args.budget_s if args.budget_s else None
    root = Path(args.root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    versions = [newest_torch(args.python) if v == "newest" else v for v in (args.torch or MATRIX)]
    results = []
    for version in versions:
        results.append(one_release(version, root, args, deadline))
        print(_line(results[-1]), flush=True)
    for version in args.refuse:
        results.append(refused_release(version, root, args, deadline))
        print(_line(results[-1]), flush=True)
    summary = {"created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": _machine(),
               "checkout": _checkout(), "command": " ".join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])]),
               "hang_timeout_s": HANG_TIMEOUT_S, "expected_culprit": CULPRIT, "results": results,
               "ok": all(r["ok"] for r in results)}
    out = Path(args.json) if args.json else root / "torch_matrix.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"summary: {out}")
    if args.table:
        print(markdown_table(summary))
    return 0 if summary["ok"] or not args.strict else 1


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--torch", action="append", metavar="V", help=f"a release to run (repeatable; default: "
                   f"{' '.join(MATRIX)}; 'newest': the newest on the index)")
    p.add_argument("--case", action="append", choices=CASES, help=f"launch cases (repeatable; default: all of "
                   f"{', '.join(CASES)})")
    p.add_argument("--refuse", action="append", default=[], metavar="V",
                   help="a release below the floor that ddplab must refuse (repeatable)")
    p.add_argument("--root", default="/tmp/ddplab-torch-matrix", help="where the environments and runs go")
    p.add_argument("--json", help="the summary (default: ROOT/torch_matrix.json)")
    p.add_argument("--python", default="python3", help="the interpreter the environments are made from")
    p.add_argument("--keep", action="store_true", help="keep each virtual environment")
    p.add_argument("--strict", action="store_true", help="exit 1 when a check failed")
    p.add_argument("--no-alone", dest="alone", action="store_false",
                   help="run the lab beside the machine's other processes, not in a PID namespace of its own")
    p.add_argument("--budget-s", type=float, default=0, help="stop starting anything after this long (0: no limit)")
    p.add_argument("--table", action="store_true", help="also print the markdown table of docs/RESULTS.md")
    return p


# ---------------------------------------------------------------- one release

def one_release(version: str, root: Path, args, deadline: float | None) -> dict:
    result: dict = {"requested": version, "checks": {}, "ok": False}
    here = root / f"torch-{version}"
    shutil.rmtree(here, ignore_errors=True)
    here.mkdir(parents=True)
    venv = here / "venv"
    try:
        started = time.monotonic()
        _make_venv(args.python, venv)
        install = _pip(venv, ["torch==" + version, str(REPO)], here / "install.log", deadline)
        result["install_s"] = round(time.monotonic() - started, 1)
        result["checks"]["installed"] = install.returncode == 0
        if install.returncode != 0:
            result["error"] = f"pip install failed (exit {install.returncode}); see {here / 'install.log'}"
            return result
        result["venv_mb"] = _size_mb(venv)
        result.update(json.loads(_run([str(venv / "bin/python"), "-c", PROBE], here, 120).stdout.strip()
                                 .splitlines()[-1]))
        result["run"] = lab_run(venv, here, deadline, alone=args.alone)
        result["checks"]["run passed"] = result["run"]["exit_code"] == 0 and result["run"]["verdict"] == "pass"
        result["checks"]["run listened on loopback only"] = result["run"]["loopback_only"] is True
        result["launch"] = {}
        for case in args.case or CASES:
            launched = launch_case(venv, here, case, deadline)
            result["launch"][case] = launched
            result["checks"][f"{case}: culprit {CULPRIT}"] = launched["culprit"] == CULPRIT
            result["checks"][f"{case}: failed, nothing left, loopback only"] = (
                launched["exit_code"] == 1 and launched["outcome"] in ("failed", "hung")
                and launched["left_running"] == 0 and launched["loopback_only"] is True)
    except (subprocess.TimeoutExpired, BudgetSpent, OSError, ValueError) as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        if not args.keep:
            shutil.rmtree(venv, ignore_errors=True)
    result["ok"] = "error" not in result and all(result["checks"].values())
    return result


def refused_release(version: str, root: Path, args, deadline: float | None) -> dict:
    """A torch below the floor, installed as metadata and files only (--no-deps: it is never imported)."""
    here = root / f"refuse-{version}"
    shutil.rmtree(here, ignore_errors=True)
    here.mkdir(parents=True)
    venv = here / "venv"
    result: dict = {"requested": version, "refused_below_floor": True, "checks": {}, "ok": False}
    try:
        _make_venv(args.python, venv)
        installed = _pip(venv, ["--no-deps", "torch==" + version], here / "install.log", deadline)
        deps = _pip(venv, ["psutil", "rich", "nvidia-ml-py"], here / "install-deps.log", deadline)
        if installed.returncode or deps.returncode:
            result["error"] = f"pip install failed; see {here}"
            return result
        env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
        proc = _run([str(venv / "bin/python"), "-m", "ddplab", "env"], here, 120, env=env)
        result.update(exit_code=proc.returncode, said=proc.stderr.strip())
        result["checks"]["refused: exit 3, one sentence naming both versions"] = (
            proc.returncode == 3 and f"torch {version}" in proc.stderr and proc.stderr.count("\n") == 2)
    except (subprocess.TimeoutExpired, BudgetSpent, OSError) as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        if not args.keep:
            shutil.rmtree(venv, ignore_errors=True)
    result["ok"] = "error" not in result and all(result["checks"].values())
    return result


def lab_run(venv: Path, here: Path, deadline: float | None, alone: bool) -> dict:
    report = here / "run.json"
    prefix = PID_NAMESPACE if alone and _pid_namespaces_work() else []
    started = time.monotonic()
    proc = _run_bounded([*prefix, str(venv / "bin/ddplab"), "run", "--out", str(here / "run"), "--json", str(report)],
                        here, _left(deadline, RUN_LIMIT_S))
    (here / "run.log").write_text(proc.stdout + proc.stderr)
    doc = _load(report)
    results = doc.get("results") or {}
    stages = {s.get("name"): s.get("verdict") for s in results.get("stages") or ()}
    listens = list(_find(doc, "listen"))
    return {"exit_code": proc.returncode, "verdict": doc.get("verdict"), "wall_s": round(time.monotonic() - started, 1),
            "duration_s": results.get("duration_s"), "stages": stages, "own_pid_namespace": bool(prefix),
            "loopback_only": bool(listens) and all(lst.get("loopback_only") is True for lst in listens),
            "stderr_tail": proc.stderr.strip().splitlines()[-3:] if proc.returncode != 0 else [],
            "did_not_end_in_s": None if proc.returncode is not None else RUN_LIMIT_S,
            "last_stage_started": _newest_dir(here / "run")}


def launch_case(venv: Path, here: Path, case: str, deadline: float | None) -> dict:
    job = here / f"launch-{case}"
    started = time.monotonic()
    proc = _run_bounded([str(venv / "bin/ddplab"), "launch", "--nproc-per-node", "2", "--hang-timeout",
                         str(HANG_TIMEOUT_S), "--out", str(job), "--", str(REPO / "examples" / f"{case}.py")], here,
                        _left(deadline, LAUNCH_LIMIT_S))
    (here / f"launch-{case}.log").write_text(proc.stdout + proc.stderr)
    results = _load(job / "report.json").get("results") or {}
    culprit = results.get("culprit") or {}
    return {"exit_code": proc.returncode, "wall_s": round(time.monotonic() - started, 1),
            "outcome": results.get("outcome"), "culprit": culprit.get("ranks"), "kind": culprit.get("kind"),
            "reason": culprit.get("reason"), "launcher_error": results.get("launcher_error"),
            "loopback_only": (results.get("listen") or {}).get("loopback_only"),
            "left_running": len(results.get("left_running") or ())}


# ---------------------------------------------------------------- helpers

class BudgetSpent(Exception):
    pass


def _left(deadline: float | None, cap_s: float) -> float:
    if deadline is None:
        return cap_s
    left = deadline - time.monotonic()
    if left <= 0:
        raise BudgetSpent("the time budget (--budget-s) is spent")
    return min(cap_s, left)


def _run(cmd: list[str], cwd: Path, timeout_s: float, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout_s, env=env,
                          stdin=subprocess.DEVNULL)


def _run_bounded(cmd: list[str], cwd: Path, timeout_s: float) -> subprocess.CompletedProcess:
    """``_run`` for a ddplab command: one that outlives its bound is ended (SIGKILL: with the PID namespace's
    --kill-child, its ranks too) and reads as exit code None, so the release's other checks still run."""
    try:
        return _run(cmd, cwd, timeout_s)
    except subprocess.TimeoutExpired as exc:
        def text(b):
            return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")

        return subprocess.CompletedProcess(cmd, None, text(exc.stdout),
                                           text(exc.stderr) + f"\n[torch_matrix] ended after {timeout_s:.0f} s\n")


def _pid_namespaces_work() -> bool:
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return False
    return subprocess.run([*PID_NAMESPACE, "true"], capture_output=True, timeout=30).returncode == 0


def _make_venv(python: str, venv: Path) -> None:
    subprocess.run([python, "-m", "venv", str(venv)], check=True, capture_output=True, text=True, timeout=300)


def _pip(venv: Path, what: list[str], log: Path, deadline: float | None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PIP_CONSTRAINT="/dev/null", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.setdefault("PIP_NO_CACHE_DIR", "1")  # several GB per release: not kept unless the caller asks
    proc = _run([str(venv / "bin/python"), "-m", "pip", "install", "-q", *what], venv.parent, _left(deadline, 1800),
                env=env)
    log.write_text(proc.stdout + proc.stderr)
    return proc


def newest_torch(python: str) -> str:
    """The newest torch release on the index pip uses (asked once, with the machine's cap lifted)."""
    env = dict(os.environ, PIP_CONSTRAINT="/dev/null", PIP_DISABLE_PIP_VERSION_CHECK="1")
    proc = subprocess.run([python, "-m", "pip", "index", "versions", "torch"], capture_output=True, text=True,
                          timeout=120, env=env)
    for line in proc.stdout.splitlines():  # "torch (2.15.0)" first
        if line.startswith("torch (") and ")" in line:
            return line[len("torch ("):line.index(")")]
    raise SystemExit(f"could not find the newest torch: {proc.stderr.strip() or proc.stdout.strip()}")


def _newest_dir(path: Path) -> str | None:
    dirs = [d for d in path.glob("*") if d.is_dir()] if path.is_dir() else []
    return max(dirs, key=lambda d: d.stat().st_mtime).name if dirs else None


def _load(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _find(doc, key: str):
    """Every value stored under ``key`` anywhere in a report (a lab run keeps one per multi-rank stage)."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k == key and isinstance(v, dict):
                yield v
            else:
                yield from _find(v, key)
    elif isinstance(doc, list):
        for v in doc:
            yield from _find(v, key)


def _size_mb(path: Path) -> int:
    return round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink()) / 1e6)


def _machine() -> dict:
    return {"host": platform.node(), "cpus": os.cpu_count(), "system": f"{platform.system()} {platform.machine()}",
            "python": platform.python_version()}


def _checkout() -> dict:
    def git(*a):
        return subprocess.run(["git", "-C", str(REPO), *a], capture_output=True, text=True).stdout.strip()

    return {"commit": git("rev-parse", "HEAD"), "branch": git("rev-parse", "--abbrev-ref", "HEAD"),
            "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}


def _line(r: dict) -> str:
    failed = [name for name, ok in r["checks"].items() if not ok]
    state = "ok" if r["ok"] else f"FAILED: {r.get('error') or ', '.join(failed)}"
    return f"torch {r.get('torch', r['requested'])}: {state}"


def markdown_table(summary: dict) -> str:
    """The table docs/RESULTS.md keeps: one row per release."""
    cases = sorted({c for r in summary["results"] for c in r.get("launch", {})}, key=CASES.index)
    head = ["torch (build)", "install", "gloo FR", "`ddplab run` quick", *[f"launch `{c}`" for c in cases]]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in summary["results"]:
        if r.get("refused_below_floor"):
            rows.append(f"| {r['requested']} (below the floor) | no deps | - | exit {r.get('exit_code')}: "
                        f"{(r.get('said') or '').splitlines()[-1].strip()} |" + " - |" * len(cases))
            continue
        if "run" not in r:
            rows.append(f"| {r['requested']} | {r.get('error', '?')} |" + " - |" * (len(head) - 2))
            continue
        build = f"CUDA {r['cuda_build']}" if r.get("cuda_build") else "CPU"
        run = r["run"]
        if run.get("did_not_end_in_s"):
            ran = f"did not end in {run['did_not_end_in_s']} s (stuck in stage {run.get('last_stage_started')})"
        else:
            ran = (f"{run['verdict'].upper() if run['verdict'] else 'exit ' + str(run['exit_code'])} in "
                   f"{run['wall_s']:.0f} s" + (", loopback only" if run["loopback_only"] else ", NOT loopback only"))
        cells = [f"{r['torch']} ({build})", f"{r['install_s']:.0f} s, {r['venv_mb'] / 1000:.1f} GB",
                 "yes" if r["gloo_flight_recorder"] else "no", ran]
        for case in cases:
            c = r["launch"].get(case)
            if c is None:
                cells.append("-")
                continue
            if c["exit_code"] is None:
                cells.append(f"did not end in {LAUNCH_LIMIT_S} s")
                continue
            right = "right" if c["culprit"] == CULPRIT else "WRONG"
            cells.append(f"{c['outcome']} in {c['wall_s']:.0f} s, culprit {c['culprit']} ({right}, {c['kind']})")
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
