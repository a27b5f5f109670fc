# Issue 12 on 2x H200 (NCCL): every broken example under `ddplab launch`, then the healthy MLP under
# plain torchrun and under `ddplab launch` (200 steps, median step time), three times each, alternating.
# Run from the repository root: bash scripts/device/launch_x2.sh
source scripts/device/common.sh
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
PY
}
launch() {  # launch NAME ARGS...: one example under ddplab launch, 2 GPUs
  local name=$1; shift
  local t0=$SECONDS
  timeout 180 $py -m ddplab launch --nproc-per-node 2 --hang-timeout 10 --out "$res/$name" -- "examples/$name.py" "$@" \
    > "$res/$name.log" 2>&1
  echo "$name: rc=$? $((SECONDS - t0))s"
  summary "$name"
}
$py -c "import torch; print('torch', torch.__version__, 'gpus', torch.cuda.device_count(), 'nccl', torch.cuda.nccl.version())"
for name in skipped_collective size_mismatch rank_oom rank_exception user_deadlock; do
  launch "$name" --steps 6
done
launch late_init --sleep 120
leftovers
for i in 1 2 3; do
  timeout 180 $py -m torch.distributed.run --nproc-per-node 2 examples/healthy_mlp.py --steps 200 > "$res/mlp_torchrun_$i.log" 2>&1
  echo "mlp torchrun $i: $(grep RESULT "$res/mlp_torchrun_$i.log")"
  timeout 180 $py -m ddplab launch --nproc-per-node 2 --out "$res/mlp_launch_$i" -- examples/healthy_mlp.py --steps 200 \
    > "$res/mlp_launch_$i.log" 2>&1
  echo "mlp ddplab launch $i: rc=$? $(grep RESULT "$res/mlp_launch_$i.log")"
done
leftovers
timeout 120 $py -m pytest -q -p no:cacheprovider tests/unit/test_job_flight.py tests/unit/test_job_torchrun_args.py \
  tests/unit/test_job_watch.py tests/integration/test_job_boot.py 2>&1 | tail -5
pack launch-x2
