# Issue 12 on 2x H200 (NCCL), for the lead to run: bash scripts/device/launch_x2.sh   (from the repository root)
#  1. every broken example under `ddplab launch`, one line each: outcome, culprit, collective, detection time;
#     then two hangs again with --ras (NCCL's RAS answer kept in the report; queries have crashed jobs on the
#     NCCL torch ships, NVIDIA/nccl#2346: a crash here is a finding, not a script error)
#  2. the overhead target: examples/healthy_mlp.py, 200 steps, under plain torchrun and under `ddplab launch`,
#     three alternating pairs; rank 0's median step time of each run, then the median of the three per launcher
#     and the difference (target: within 1 %)
# Output: these lines, and $OUT/launch-x2.tgz (logs, report.json/.html, stacks; no flight records).
source scripts/device/common.sh
# No network on the device machine: install from this checkout alone (PYTHONPATH=src, set above, serves too).
$py -m pip install -q --no-index --no-build-isolation --no-deps -e . > "$res/pip.log" 2>&1 \
  || echo "pip install -e . failed (see pip.log); running from PYTHONPATH=src"

summary() {  # one line from a job's report.json, and the fault time the example printed
  $py - "$res/$1/report.json" "$res/$1.log" <<'PY'
import json, re, sys
r = json.load(open(sys.argv[1]))["results"]
stamps = [float(t) for t in re.findall(r"\] (?:injecting fault|joining the job).* at (\d+\.\d+)", open(sys.argv[2]).read())]
c = r["culprit"] or {}
late = r["detected_at"] - max(stamps) if stamps and r["detected_at"] else None
print(f"  outcome={r['outcome']} culprit={c.get('ranks')} kind={c.get('kind')} collective={c.get('collective')} "
      f"analyzer={(c.get('analyzer') or {}).get('status')} torchrun_blames={r['torchrun_root_cause_rank']} "
      f"detected_after_fault_s={late if late is None else round(late, 2)} stacks={sorted(r['stacks'])} "
      f"left_running={len(r['left_running'])}")
ras = (r.get("hang") or {}).get("ras")
if ras:
    print(f"  ras: {ras['status']} ({ras.get('why') or 'complete'}) from {ras['address']}, NCCL "
          f"{ras['library_version']}, {ras['seconds']} s, sent {ras['sent']}, {len(ras['answer'])} characters of {ras['format']}")
    if ras["answer"]:
        print("  ras answer: " + " | ".join(line.strip() for line in ras["answer"].splitlines() if line.strip())[:800])
PY
}
launch() {  # launch JOB [ddplab options] -- EXAMPLE ARGS...: one job under ddplab launch, one GPU per rank
  local job=$1; shift
  local t0=$SECONDS
  timeout 240 $py -m ddplab launch --nproc-per-node 2 --hang-timeout 10 --out "$res/$job" "$@" \
    > "$res/$job.log" 2>&1
  echo "$job: rc=$? $((SECONDS - t0))s"
  summary "$job"
}

$py -c "import torch; print('torch', torch.__version__, 'gpus', torch.cuda.device_count(), 'nccl', torch.cuda.nccl.version())"
for name in skipped_collective size_mismatch rank_oom rank_exception user_deadlock; do
  launch "$name" -- "examples/$name.py" --steps 6
done
launch late_init -- examples/late_init.py --sleep 120
launch user_deadlock_ras --ras -- examples/user_deadlock.py --steps 6
launch skipped_collective_ras --ras -- examples/skipped_collective.py --steps 6
leftovers

for i in 1 2 3; do
  timeout 300 $py -m torch.distributed.run --nproc-per-node 2 examples/healthy_mlp.py --steps 200 \
    > "$res/mlp_torchrun_$i.log" 2>&1
  echo "mlp torchrun $i: rc=$?"
  timeout 300 $py -m ddplab launch --nproc-per-node 2 --out "$res/mlp_launch_$i" -- examples/healthy_mlp.py \
    --steps 200 > "$res/mlp_launch_$i.log" 2>&1
  echo "mlp ddplab launch $i: rc=$?"
done
$py - "$res" <<'PY'
import json, pathlib, re, statistics, sys
res = pathlib.Path(sys.argv[1])
def median_ms(log):
    found = re.search(r"RESULT (\{.*\})", (res / log).read_text())
    return json.loads(found.group(1))["median_ms"] if found else None
pairs = [(median_ms(f"mlp_torchrun_{i}.log"), median_ms(f"mlp_launch_{i}.log")) for i in (1, 2, 3)]
for i, (plain, ours) in enumerate(pairs, 1):
    print(f"pair {i}: median step torchrun {plain} ms, ddplab launch {ours} ms")
if all(v is not None for pair in pairs for v in pair):
    plain, ours = statistics.median(p for p, _ in pairs), statistics.median(o for _, o in pairs)
    print(f"MEDIANS torchrun {plain:.4f} ms, ddplab launch {ours:.4f} ms: ddplab launch {100 * (ours - plain) / plain:+.2f} % "
          "(target: within 1 %)")
else:
    print("MEDIANS missing: a run printed no RESULT line (see mlp_*.log)")
PY
leftovers

# The launcher only watches: unlike its ranks it must hold no GPU memory (it asks torch which machine this is,
# platform.detect, which initialises CUDA's runtime in the launcher: check that this creates no context on a
# GPU). While a long MLP job trains, list the GPU's compute processes (NVML's pids).
$py -m ddplab launch --nproc-per-node 2 --out "$res/gpu_holders" -- examples/healthy_mlp.py --steps 20000 \
  > "$res/gpu_holders.log" 2>&1 &
launcher=$!
for _ in $(seq 60); do
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader > "$res/gpu_holders.txt" 2>&1
  [ "$(grep -c MiB "$res/gpu_holders.txt")" -ge 2 ] && break
  sleep 2
done
echo "GPU compute processes while ddplab launch (pid $launcher) ran: $(tr '\n' ';' < "$res/gpu_holders.txt")"
grep -q "^$launcher," "$res/gpu_holders.txt" && echo "LAUNCHER HOLDS GPU MEMORY" || echo "launcher pid not among them"
wait $launcher
echo "gpu_holders job: rc=$?"
summary gpu_holders

timeout 180 $py -m pytest -q -p no:cacheprovider tests/unit/test_job_flight.py tests/unit/test_job_torchrun_args.py \
  tests/unit/test_job_watch.py tests/unit/test_job_ras.py tests/unit/test_launch_page.py \
  tests/integration/test_job_boot.py 2>&1 | tail -5
tar czf "$OUT/launch-x2.tgz" -C "$res" --exclude=flight.json --exclude=fr --exclude=pids --exclude=answered .
ls -l "$OUT/launch-x2.tgz"
