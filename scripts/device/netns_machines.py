"""Several "machines" on one GPU host: a network namespace per machine, a block of GPUs and one ddplab
launcher in each, then what their reports say across machines (for the lead to run; root only).

    python3 scripts/device/netns_machines.py OUT_DIR MACHINES GPUS_PER_MACHINE COMMAND [ARGS...]
    e.g. python3 scripts/device/netns_machines.py /tmp/r 2 2 sweep --per-device --nproc 2 -b 8 -e 256M -f 4

Machine i sees GPUs i*G .. i*G+G-1 (CUDA_VISIBLE_DEVICES), has address 10.9.0.(i+1), and runs
`ddplab COMMAND ARGS --nnodes MACHINES --rdzv-endpoint 10.9.0.1:29400`. The namespaces share one host, so
NCCL would take them for one node (its host hash) and join them over P2P/SHM instead of the network:
each machine gets its own NCCL_HOSTID so "inter-machine" really is the socket transport on the veth.
Prints each launcher's exit code and verdict, then machine 0's ``results.machines`` rows (storm: latency,
sweep: busbw at the largest size) or pairs (pairwise), and the NCCL transport lines; exit 1 when a
launcher failed, 3 where namespaces cannot be made.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: tests/netns.py

from tests.netns import Machines, NamespacesUnavailable  # noqa: E402

PORT = 29400


def main(out: Path, count: int, gpus: int, args: list[str]) -> int:
    out.mkdir(parents=True, exist_ok=True)
    try:
        machines = Machines(count).__enter__()
    except NamespacesUnavailable as exc:
        print(f"cannot create network namespaces here: {exc}")
        return 3
    with machines:
        launchers = []
        for i, machine in enumerate(machines):
            visible = ",".join(str(i * gpus + g) for g in range(gpus))
            env = dict(os.environ, CUDA_VISIBLE_DEVICES=visible, NCCL_DEBUG="INFO", NCCL_HOSTID=f"netns-machine-{i}",
                       PYTHONUNBUFFERED="1")
            log = open(out / f"machine{i}.log", "w")
            argv = [sys.executable, "-m", "ddplab", *args, "--nnodes", str(count), "--rdzv-endpoint",
                    f"{machines[0].address}:{PORT}", "--run-dir", str(out / f"run{i}"),
                    "--json", str(out / f"machine{i}.json")]
            launchers.append(machine.popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT))
        codes = [p.wait(timeout=900) for p in launchers]
        left = [m.pids() for m in machines]
    docs = [json.loads(p.read_text()) if p.exists() else None for p in (out / f"machine{i}.json" for i in range(count))]
    for i, (code, doc) in enumerate(zip(codes, docs)):
        print(f"machine{i}: rc={code} verdict={doc and doc['verdict']}")
    if docs[0] is not None:
        show(docs[0]["results"])
    for i in range(count):
        lines = [line.strip() for line in (out / f"machine{i}.log").read_text(errors="replace").splitlines()
                 if "NCCL INFO" in line and ("via P2P" in line or "via SHM" in line or "NET/" in line)]
        print(f"machine{i} NCCL transports:", *(f"  {line}" for line in lines[:6]), sep="\n")
    print(f"left running in the namespaces: {left}")
    return 0 if all(c in (0, 1) for c in codes) and all(docs) else 1


def show(results: dict) -> None:
    machines = results.get("machines") or {}
    print("machines:", machines.get("machines"))
    for row in machines.get("latency", []):
        print(f"  storm {row['scope']:<14} {','.join(row['machines']):<24} ranks {row['ranks']}: "
              f"{row['mean_us']:.1f} us")
    rows = machines.get("rows", [])
    largest = max((r["size_bytes"] for r in rows), default=None)
    for row in rows:
        if row["size_bytes"] == largest:
            print(f"  sweep {row['scope']:<14} {','.join(row['machines']):<24} ranks {row['ranks']}: "
                  f"{row['size_bytes']} B {row['time_us']:.1f} us busbw {row['busbw_gbps']:.1f} GB/s "
                  f"#wrong {row['num_wrong']}")
    for pair in results.get("pairs", []):
        print(f"  pair {pair['machine_a']} <-> {pair['machine_b']} round {pair['round']}: "
              f"{pair['latency_us']:.1f} us @ {pair['latency_size_bytes']} B, "
              f"{pair['busbw_gbps']:.1f} GB/s @ {pair['busbw_size_bytes']} B")
    if results.get("finding"):
        print("  finding:", json.dumps(results["finding"]))


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]))
