#!/usr/bin/env bash
# 2x H200, round A (issues 9, 10, 11): the environment, the GPU tests, the sweep against nccl-tests back to back
# (issue 9 §4), whether the launcher's device queries inside timed windows make single-size spikes, and `clean`
# beside a user's own GPU job (issue 9 §1). nccl-tests' binaries are built by the device call itself from the
# carried source into /tmp/nccl-tests-build (neither its code nor its build is part of this project).
#   RES=/tmp/r/a bash scripts/device/round_a.sh      (repository root; results packed into $OUT/round_a.tgz)
source scripts/device/common.sh
$py -m pip install -q --no-index --no-build-isolation --no-deps -e . > "$res/pip.log" 2>&1 || echo "pip failed"
nvidia-smi -L
step env env
timeout 300 $py -m pytest -q -m gpu tests/gpu -p no:cacheprovider > "$res/gpu_tests.log" 2>&1
echo "gpu tests: rc=$? $(tail -1 "$res/gpu_tests.log")"

# Issue 9 §4: ddplab's all_reduce sweep against nccl-tests on the same machine, back to back.
if [ -x /tmp/nccl-tests-build/all_reduce_perf ]; then
  LD_LIBRARY_PATH=/tmp/nccl-link/lib timeout 300 /tmp/nccl-tests-build/all_reduce_perf -b 4 -e 4G -f 2 -g 2 \
    > "$res/nccl_tests_all_reduce.txt" 2>&1
  echo "nccl-tests all_reduce: rc=$? $(grep 'Avg bus' "$res/nccl_tests_all_reduce.txt")"
fi
step sweep_all_reduce sweep --nproc 2 --per-device -b 4 -e 4G -f 2
$py -m ddplab compare "$res/nccl_tests_all_reduce.txt" "$res/sweep_all_reduce.json" --tolerance 3% --min-size 16M \
  --json "$res/compare_all_reduce.json" > "$res/compare_all_reduce.txt" 2>&1
echo "compare (>= 16 MiB, 3 %): rc=$? $(tail -1 "$res/compare_all_reduce.txt")"

# The spikes' suspect: the sampler's device queries landing inside timed windows. One repetition per size, queries
# allowed inside the windows vs kept out of them, twice each.
for i in 1 2; do
  step spikes_inside_$i sweep --nproc 2 --per-device --ops all_reduce,all_gather,reduce -b 8 -e 64M -f 2 -R 1 \
    --sample-while-timing
  step spikes_kept_out_$i sweep --nproc 2 --per-device --ops all_reduce,all_gather,reduce -b 8 -e 64M -f 2 -R 1
done
$py - "$res" <<'PY'
import json, pathlib, sys
for path in sorted(pathlib.Path(sys.argv[1]).glob("spikes_*.json")):
    r = json.loads(path.read_text())["results"]
    s = r.get("sampler") or {}
    spikes = ", ".join("%s %s B x%s" % (x["op"], x["size_bytes"], x["factor"]) for x in r.get("spikes") or [])
    print(f"{path.stem}: spikes {len(r.get('spikes') or [])} ({spikes}); repetitions overlapped by a device "
          f"query {s.get('repetitions_overlapped_by_a_device_query')} of {s.get('repetitions')}")
PY

# Issue 9 §1: a user's own GPU job, started with nohup from a shell that then exited (its parent is init), with a
# secret on its command line. ddplab must list it as another process (program name only) and never end it.
( setsid nohup $py -c "import time, torch; x = torch.ones(400 << 20, device='cuda:1'); time.sleep(600)" \
    --hf-token hf_notarealsecret >/dev/null 2>&1 & echo $! > "$res/user_job.pid" ) ; sleep 8
job=$(cat "$res/user_job.pid")
step clean_list clean
step clean_yes clean --yes
step env_beside_job env
$py - "$res" "$job" <<'PY'
import json, pathlib, sys
res, job = pathlib.Path(sys.argv[1]), int(sys.argv[2])
for name in ("clean_list", "clean_yes", "env_beside_job"):
    r = json.loads((res / f"{name}.json").read_text())["results"]
    others = {o["pid"]: o for o in r.get("other_processes", [])}
    print(f"{name}: orphans {[o['pid'] for o in r['orphans']]}; user job listed as other process: "
          f"{job in others} {others.get(job, {}).get('program')!r} mem {others.get(job, {}).get('device_mem_bytes')}; "
          f"secret in JSON: {'hf_notarealsecret' in (res / f'{name}.json').read_text()}")
PY
kill -0 "$job" && echo "user job $job still running after clean --yes: yes" || echo "user job $job: GONE"
kill "$job"; sleep 2
leftovers
pack round_a
