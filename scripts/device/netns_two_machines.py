"""Two "machines" on one GPU host: a network namespace per GPU, one ddplab launcher in each.

    python3 scripts/device/netns_two_machines.py OUT_DIR COMMAND [ARGS...]
    e.g. python3 scripts/device/netns_two_machines.py /tmp/r train --per-device --nproc 1 --steps 50
    DDPLAB_AS_SRUN=1 python3 scripts/device/netns_two_machines.py ...: no --nnodes/--rdzv-endpoint; each
    machine gets the SLURM_* variables srun sets for one task per node instead (issue 13)

Machine i sees GPU i only (CUDA_VISIBLE_DEVICES) and has address 10.9.0.(i+1); both run
`ddplab COMMAND ARGS --nnodes 2 --rdzv-endpoint 10.9.0.1:29400` with NCCL_DEBUG=INFO, so the
logs show which interface NCCL's bootstrap and socket transport chose. Prints each launcher's
exit code and where its report says it listened; exit 1 when either failed. Root only (namespaces);
a machine that refuses namespaces is said, exit 3.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: tests/netns.py

from tests.netns import Machines, NamespacesUnavailable  # noqa: E402

PORT = 29400


def main(out: Path, args: list[str]) -> int:
    out.mkdir(parents=True, exist_ok=True)
    try:
        machines = Machines(2).__enter__()
    except NamespacesUnavailable as exc:
        print(f"cannot create network namespaces here: {exc}")
        return 3
    with machines:
        launchers = []
        for i, machine in enumerate(machines):
            env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(i), NCCL_DEBUG="INFO", PYTHONUNBUFFERED="1")
            log = open(out / f"machine{i}.log", "w")
            meet = ["--nnodes", "2", "--rdzv-endpoint", f"{machines[0].address}:{PORT}"]
            if os.environ.get("DDPLAB_AS_SRUN"):
                env.update(_srun_variables(i, machines))
                meet = []
            argv = [sys.executable, "-m", "ddplab", *args, *meet, "--run-dir", str(out / f"run{i}"),
                    "--json", str(out / f"machine{i}.json")]
            launchers.append(machine.popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT))
        codes = [p.wait(timeout=900) for p in launchers]
        left = [m.pids() for m in machines]
    for i, code in enumerate(codes):
        report = out / f"machine{i}.json"
        listen = json.loads(report.read_text())["results"]["listen"] if report.exists() else {}
        print(f"machine{i}: rc={code} listen: {listen.get('summary')}")
        nccl = [line.strip() for line in (out / f"machine{i}.log").read_text(errors="replace").splitlines()
                if "NCCL INFO" in line and ("Bootstrap" in line or "NET/Socket" in line or "via P2P" in line
                                            or "via SHM" in line or "NET/" in line)]
        print("\n".join(f"  {line}" for line in nccl[:8]))
    print(f"left running in the namespaces: {left}")
    return 0 if codes == [0, 0] else 1


def _srun_variables(node: int, machines) -> dict[str, str]:
    """What srun sets for one task per node on a 2-node step (the nodes named by their addresses)."""
    nodes = ",".join(m.address for m in machines)
    return {"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_NNODES": "2", "SLURM_STEP_NUM_NODES": "2",
            "SLURM_NTASKS": "2", "SLURM_STEP_NUM_TASKS": "2", "SLURM_TASKS_PER_NODE": "1(x2)",
            "SLURM_STEP_NODELIST": nodes, "SLURM_JOB_NODELIST": nodes, "SLURM_NODEID": str(node),
            "SLURM_PROCID": str(node), "SLURM_LOCALID": "0"}


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2:]))
