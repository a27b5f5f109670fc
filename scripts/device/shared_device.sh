#!/usr/bin/env bash
# Issue 9 sections 2 and 3 on one GPU: which NCCL calls bind to, and the default setup for 2 ranks
# sharing the GPU (vendor backend + MPS, gloo, vendor backend alone), with nothing left running.
# Usage (device machine, repo root): [PRELOAD=/path/to/libnccl.so.2] [ITERS=10000] bash scripts/device/shared_device.sh
#   PRELOAD set (e.g. NCCL 2.30.7): it is preloaded for every step, as a user trying a newer NCCL would.
#   PRELOAD unset: one extra `env` preloads a copy of torch's own libnccl from /tmp, so two copies are
#   mapped and the bound one must be the preloaded copy.
source scripts/device/common.sh
iters=${ITERS:-10000}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
if [ -z "${PRELOAD:-}" ]; then
  own=$($py -c 'import glob, os, torch; print(sorted(glob.glob(os.path.join(os.path.dirname(torch.__file__), "..", "nvidia", "nccl", "lib", "libnccl.so*")))[0])')
  mkdir -p /tmp/nccl-copy && cp "$own" /tmp/nccl-copy/libnccl.so.2
  LD_PRELOAD=/tmp/nccl-copy/libnccl.so.2 step env_copy_preloaded env
else
  export LD_PRELOAD=$PRELOAD
fi
step env env
step storm_shared_auto storm --nproc 2 --share-device --iters "$iters"
step storm_shared_mps storm --nproc 2 --share-device --mps --iters "$iters"
step storm_shared_gloo storm --nproc 2 --share-device --backend gloo --no-mps --iters "$iters"
step storm_shared_nccl_no_mps storm --nproc 2 --share-device --backend nccl --no-mps --iters "$iters"
step train_shared_auto train --nproc 2 --share-device --model mlp --steps 20
$py - "$res" <<'EOF'
import json, pathlib, sys
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
    doc = json.loads(path.read_text())
    p, r = doc["platform"], doc["results"]
    if doc["command"] == "env":
        copies = [(c["version"], c["path"], c["bound_via"]) for c in p["collective_loaded_copies"]]
        print(f"{path.stem}: bound {p['collective_loaded_version']} {p['collective_loaded_path']}; copies {copies}; "
              f"shared plan {r['shared_device'].get('backend')} daemon={r['shared_device'].get('sharing_daemon')}")
    else:
        mean = f"mean {r['mean_us']:.1f} us" if r.get("mean_us") is not None else ""
        print(f"{path.stem}: {doc['verdict']} backend {r['backend']} {mean} daemon={r.get('sharing_daemon')}")
EOF
leftovers
pack shared_device
