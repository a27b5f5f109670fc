"""A plain torchrun worker for the kill_launcher drill: joins the group, holds device memory, says so in
<ready-dir>/<local rank>, and issues all_reduces until killed. It carries no ddplab marker on purpose: `ddplab
clean` must recognise it from torchrun's own environment and its real parent.
"""

import argparse
import os
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", required=True)
    parser.add_argument("--device-type", required=True)
    parser.add_argument("--placement", choices=("shared", "per-device"), required=True)
    parser.add_argument("--ready-dir", required=True, help="where to say that init and allocation are done")
    args = parser.parse_args()

    import torch
    import torch.distributed as dist

    from ddplab.platform import DeviceRuntime

    local_rank = int(os.environ["LOCAL_RANK"])
    runtime = DeviceRuntime(args.device_type, 0 if args.placement == "shared" else local_rank)
    runtime.activate()
    dist.init_process_group(args.backend)
    hold = torch.ones(64 << 20, device=runtime.device)  # 256 MiB that an orphan keeps holding
    buf = torch.ones(1024, device=runtime.device)
    # The drill kills the agent only after this: a worker still in init could end on its own.
    Path(args.ready_dir, str(local_rank)).write_text(f"{os.getpid()}\n")
    while True:
        dist.all_reduce(buf)
        runtime.synchronize()
        buf.fill_(float(hold[0]))
        time.sleep(0.05)


if __name__ == "__main__":
    main()
