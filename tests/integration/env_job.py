"""A user's script as `ddplab launch` runs it in the exposure test: torch's env:// contract (RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT) into init_process_group("gloo"), a few all_reduces, then a pause while the test
reads every listening socket of the job. Each rank writes what it was handed to OUT_DIR/handed-<rank>.json (a
file of its own: the ranks share the launcher's stdout, where their lines can interleave).

    env_job.py OUT_DIR [PAUSE_S]
"""

import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

HANDED = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_USE_AGENT_STORE",
          "GLOO_SOCKET_IFNAME")


def main() -> None:
    out_dir, pause_s = Path(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else 2.0
    dist.init_process_group("gloo")  # env:// by default: the variables elastic handed this rank
    total = torch.ones(4)
    for _ in range(5):
        dist.all_reduce(total)
    time.sleep(pause_s)  # the job is up: every socket it listens on is open now
    dist.barrier()
    handed = {"sum": total.tolist(), **{k: os.environ.get(k) for k in HANDED}}
    (out_dir / f"handed-{dist.get_rank()}.json").write_text(json.dumps(handed))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
