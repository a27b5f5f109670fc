#!/usr/bin/env bash
# One H200: where `ddplab check` spends its 45.9 s (issue 20 asks <= 30 s on 1-2 GPUs). Times a Python start, torch's
# import and a CUDA context with and without MPS; then one check with every subprocess logged (probe/sitecustomize.py)
# and the mtimes of its run directory and MPS logs, so each stage's start, daemon, ranks and teardown show in order.
source scripts/device/common.sh
$py -m pip install -q --no-index --no-build-isolation --no-deps -e . > "$res/pip.log" 2>&1 || echo "pip failed"
nvidia-smi -L
for what in "pass" "import torch" "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()"; do
  t0=$(date +%s%3N); $py -c "$what"; echo "python -c '$what': $(( $(date +%s%3N) - t0 )) ms"
done
export PROBE_LOG=$res/popen.log PYTHONPATH=$PWD/scripts/device/probe:$PWD/src
for run in 1 2; do
  t0=$(date +%s%3N); echo "check $run starts at $t0 ms" >> "$res/popen.log"
  $py -m ddplab check --out "$res/check$run" --format nagios > "$res/check$run.nagios" 2> "$res/check$run.log"
  echo "check $run: rc=$? wall $(( $(date +%s%3N) - t0 )) ms"; head -c 300 "$res/check$run.nagios"; echo
  $py - "$res/check$run/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
print("  stages:", ", ".join(f"{s['name']} {s.get('duration_s')}" for s in r["stages"]))
def walk(o, name):
    if isinstance(o, dict):
        if isinstance(o.get("sharing_daemon"), dict):
            print("  ", name, "daemon:", o["sharing_daemon"].get("events"))
        for v in o.values():
            walk(v, name)
    elif isinstance(o, list):
        for v in o:
            walk(v, name)
for s in r["stages"]:
    walk(s.get("report"), s["name"])
PY
  find "$res/check$run" -printf '%T@ %p\n' | sort -n | sed "s|$res/||" > "$res/check${run}_mtimes.txt"
done
cat "$res/popen.log" | sed "s|$PWD/||g" | cut -c1-230
for f in $(find "$res/check1" -name control.log); do echo "== $f"; cat "$f"; done | head -60
leftovers
pack check_timeline
