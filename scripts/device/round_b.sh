#!/usr/bin/env bash
# 2x H200, round B (issue 11's "run --profile full re-run after the change"; also every lab stage on the GPU):
#   RES=/tmp/r/b bash scripts/device/round_b.sh      (results packed into $OUT/round_b.tgz)
source scripts/device/common.sh
$py -m pip install -q --no-index --no-build-isolation --no-deps -e . > "$res/pip.log" 2>&1 || echo "pip failed"
[ -d .whl ] && $py -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=$PYTHONPATH:/tmp/site
t0=$SECONDS
$py -m ddplab run --profile full --out "$res/full" --json "$res/full.json" > "$res/full.log" 2>&1
echo "run --profile full: rc=$? $((SECONDS - t0))s :: $(tail -1 "$res/full.log")"
$py - "$res/full.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for s in d["results"]["stages"]:
    print(f"  {s['name']:<22} {s['verdict']:<5} {s.get('duration_s')}s  {s.get('summary', '')[:150]}")
PY
leftovers
pack round_b
