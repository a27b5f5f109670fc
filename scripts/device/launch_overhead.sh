#!/usr/bin/env bash
# Issue 12's overhead target, taken apart on 2x H200: where does `ddplab launch`'s step-time cost come from?
# examples/healthy_mlp.py (DDP MLP, 1,000 steps, rank 0's median step) under four setups, alternating, four rounds:
#   torchrun           plain torchrun (torch's own flight-recorder default)
#   torchrun_fr2000    plain torchrun with the recorder at ddplab's setting (TORCH_FR_BUFFER_SIZE=2000)
#   launch             ddplab launch as users run it
#   launch_fr0         ddplab launch with the recorder switched off by the user (ddplab leaves it alone):
#                      what is left is the boot module, the beacon thread and the launcher's sampler
#   RES=/tmp/r/o bash scripts/device/launch_overhead.sh        (results packed into $OUT/launch_overhead.tgz)
source scripts/device/common.sh
$py -m pip install -q --no-index --no-build-isolation --no-deps -e . > "$res/pip.log" 2>&1 || echo "pip failed"
mlp=(examples/healthy_mlp.py --steps 1000)
for i in 1 2 3 4; do
  timeout 120 $py -m torch.distributed.run --nproc-per-node 2 "${mlp[@]}" > "$res/torchrun_$i.log" 2>&1
  TORCH_FR_BUFFER_SIZE=2000 timeout 120 $py -m torch.distributed.run --nproc-per-node 2 "${mlp[@]}" \
    > "$res/torchrun_fr2000_$i.log" 2>&1
  timeout 120 $py -m ddplab launch --nproc-per-node 2 --out "$res/launch_$i" -- "${mlp[@]}" > "$res/launch_$i.log" 2>&1
  TORCH_FR_BUFFER_SIZE=0 timeout 120 $py -m ddplab launch --nproc-per-node 2 --out "$res/launch_fr0_$i" -- "${mlp[@]}" \
    > "$res/launch_fr0_$i.log" 2>&1
done
$py - "$res" <<'PY'
import json, pathlib, re, statistics, sys
res = pathlib.Path(sys.argv[1])
def median_ms(log):
    found = re.search(r"RESULT (\{.*\})", log.read_text())
    return json.loads(found.group(1))["median_ms"] if found else None
base = None
for setup in ("torchrun", "torchrun_fr2000", "launch", "launch_fr0"):
    runs = [median_ms(res / f"{setup}_{i}.log") for i in (1, 2, 3, 4)]
    ok = [r for r in runs if r is not None]
    med = statistics.median(ok) if ok else None
    base = base or med
    rel = f"{100 * (med - base) / base:+.2f} % vs torchrun" if med and base else ""
    print(f"{setup:<16} medians of 4 runs {[round(r, 4) if r else r for r in runs]} ms -> {med and round(med, 4)} ms {rel}")
PY
leftovers
tar czf "$OUT/launch_overhead.tgz" -C "$res" --exclude=flight.json --exclude=fr .
