#!/usr/bin/env bash
# Issue 14's done criteria on 2x H200, back to back on one machine: nccl-tests, then ddplab's storm and sweep
# through the library engine (NCCL called through nccl4py on torch's own buffers) and through torch, compared
# with `ddplab compare`; and, where NCCL >= 2.30 is loaded, 2 ranks on one GPU through the library engine with and
# without the sharing daemon (MPS).
#
#   bash scripts/device/library_engine_x2.sh [STEP...]     (repository root; default: every step but shared)
#
# Steps (the default set took under 10 minutes of one device call in the first part's run: each sweep ~15 s of
# ranks, nccl-tests' build ~1-2 min; if a call runs out, split it as `env nccl-tests storm` then
# `library-sweep torch-sweep compare summary`: RES keeps earlier results while the machine stays warm):
#   env            `ddplab env`: the binding importable, and calling the libnccl torch's calls bind to
#   nccl-tests     the nccl-tests binaries built beforehand by the device call ($NCCL_TESTS_BIN, default
#                  /tmp/nccl-tests-build; linked against torch's own libnccl in $NCCL_TESTS_LIB): all 7 *_perf
#                  binaries, -b 8 -e 1G -f 2 -g 2
#   storm          ddplab storm --engine both (10,000 x 4 B all_reduce, one rank per GPU)
#   library-sweep  ddplab sweep --engine library --ops all -b 8 -e 1G -f 2 (one rank per GPU)
#   torch-sweep    ddplab sweep --ops all -b 8 -e 1G -f 2 (the torch engine, the same sizes)
#   compare        ddplab compare: nccl-tests vs each engine's sweep (--tolerance 10%), torch vs library
#   shared         2 ranks on GPU 0, library engine, with MPS and with --no-mps; only if the loaded NCCL is
#                  >= 2.30 (run it with LD_PRELOAD=/path/to/libnccl.so.2.30.7 exported)
#   summary        one line per target, saying whether it was met (also printed after the other steps)
# Needs: the nccl4py wheel in .whl/ (nccl4py-0.6.0-...whl; cuda-core, cuda-bindings, cuda-pathfinder and numpy are
# in the image). Results: $RES (default /tmp/ddplab-results) and, packed, $OUT/library-engine.tgz.
#
# What confirms each target (the summary step prints these lines):
#   storm      library_storm.json: results.library_summary.mean_us <= 15 (the library engine, pipelined mean,
#              4-byte all_reduce), results.library_correct true; results.added_cost[0] is what torch adds per call
#   sweep      compare_nccl_tests_library.json: exit 0 of `ddplab compare nccl_tests_all.txt library_sweep.json
#              --tolerance 10%`, and the summary's count of rows slower than nccl-tests by more than 10 % (spikes
#              included, which compare reports as WARN rather than as regressions) is 0; library_sweep.json
#              results.num_wrong_total 0
#   torch      compare_nccl_tests_torch.json / compare_torch_library.json: the torch engine's gap per size (the
#              cost the library engine takes away; no target)
#   shared     storm_shared_library_mps.json: results.mean_us near 45 us with results.sharing_daemon set;
#              storm_shared_library_no_mps.json: results.mean_us near 4,500 us (time slicing: verdict fail, exit 1,
#              expected, with the "library engine setup" warning in results.library.warnings); both with results.library.binding.library_version >= 2.30 and, where the policy chose
#              gloo for torch, NCCL_MULTI_RANK_GPU_ENABLE=1 in results.library.env
source scripts/device/common.sh
steps=${*:-env nccl-tests storm library-sweep torch-sweep compare summary}
sizes=(-b 8 -e 1G -f 2)

python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .whl/nccl4py-*.whl || { echo "nccl4py wheel missing in .whl/"; exit 3; }
export PYTHONPATH=$PYTHONPATH:/tmp/site  # after src/: ddplab from this tree, nccl4py beside the image's packages

nccl_tests() {  # run the nccl-tests binaries built beforehand (the device call builds them from the carried source;
  # nccl-tests' code and its build stay outside this project), against torch's own libnccl, -g 2
  local bin_dir=${NCCL_TESTS_BIN:-/tmp/nccl-tests-build} lib=${NCCL_TESTS_LIB:-/tmp/nccl-link/lib}
  [ -x "$bin_dir/all_reduce_perf" ] || { echo "nccl-tests: no binaries in $bin_dir, skipped"; return 0; }
  for bin in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
    LD_LIBRARY_PATH=$lib timeout 300 "$bin_dir/${bin}_perf" "${sizes[@]}" -g 2 > "$res/nccl_tests_$bin.txt" 2>&1
    echo "nccl-tests $bin: rc=$? $(grep 'Avg bus' "$res/nccl_tests_$bin.txt")"
  done
  cat "$res"/nccl_tests_{all_reduce,all_gather,reduce_scatter,broadcast,reduce,alltoall,sendrecv}.txt \
    > "$res/nccl_tests_all.txt"
}

compare() {  # compare NAME A B [ARGS]: `ddplab compare A B --json NAME.json`, its text in NAME.txt
  local name=$1 a=$2 b=$3; shift 3
  [ -s "$a" ] && [ -s "$b" ] || { echo "$name: skipped ($a or $b missing)"; return 0; }
  $py -m ddplab compare "$a" "$b" "$@" --json "$res/$name.json" > "$res/$name.txt" 2>&1
  echo "$name: rc=$? $(tail -1 "$res/$name.txt")"
}

shared() {  # the shared-device story through the library engine: only where the loaded NCCL allows it
  local loaded
  loaded=$($py -c "from ddplab import platform; print(platform.detect(with_memory=False).collective_loaded_version)")
  if ! $py -c "import sys; v = tuple(int(x) for x in sys.argv[1].split('.')); sys.exit(v < (2, 30))" "$loaded" \
      2>/dev/null; then
    echo "shared: skipped, NCCL $loaded is loaded (needs >= 2.30: export LD_PRELOAD=/path/to/libnccl.so.2.30.7)"
    return 0
  fi
  echo "shared: NCCL $loaded loaded (LD_PRELOAD=${LD_PRELOAD:-})"
  step env_shared env
  step storm_shared_library_mps storm --engine library --nproc 2 --share-device --iters 10000
  step storm_shared_library_no_mps storm --engine library --nproc 2 --share-device --no-mps --iters 2000
}

summary() {  # one line per target, from the JSON documents (what confirms each one: the header above)
  $py - "$res" <<'EOF'
import json, pathlib, sys
res = pathlib.Path(sys.argv[1])
def doc(name):
    path = res / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None
env = doc("env")
if env:
    b = env["results"].get("library_binding") or {}
    print(f"binding: importable={b.get('importable')} {b.get('name')} {b.get('binding_version')} calls NCCL "
          f"{b.get('library_version')} at {b.get('library_path')}; same as torch's: {b.get('same_library_as_framework')}")
storm = doc("library_storm")
if storm and storm["results"].get("library_summary"):
    r = storm["results"]
    lib, fw = r["library_summary"]["mean_us"], r["mean_us"]
    cost = r["added_cost"][0]
    print(f"storm: library engine {lib:.2f} us mean (target <= 15 us: {'MET' if lib <= 15 else 'NOT MET'}), "
          f"correct {r['library_correct']}; torch {fw:.2f} us; torch adds {cost['added_us']:.2f} us per call "
          f"({100 * cost['share']:.0f} %)")
for name, what in (("compare_nccl_tests_library", "library engine"), ("compare_nccl_tests_torch", "torch engine")):
    c = doc(name)
    if not c:
        continue
    rows = c["results"]["rows"]
    over = [x for x in rows if x["time_change"] > 0.10]
    worst = max(rows, key=lambda x: x["time_change"]) if rows else None
    text = (f"{worst['op']} {worst['size_bytes']} B {'in' if worst['in_place'] else 'out'}-place "
            f"{100 * worst['time_change']:+.1f} %") if worst else "none"
    target = " (target: 0 over 10 %: " + ("MET" if not over else "NOT MET") + ")" if what == "library engine" else ""
    print(f"{what} vs nccl-tests: {len(rows)} rows lined up, {len(over)} slower by more than 10 % (spikes "
          f"included){target}; worst {text}; compare verdict {c['verdict']}")
sweep = doc("library_sweep")
if sweep:
    print(f"library sweep: #wrong {sweep['results']['num_wrong_total']}, errors {len(sweep['results']['errors'])}, "
          f"verdict {sweep['verdict']}")
for name in ("storm_shared_library_mps", "storm_shared_library_no_mps"):
    d = doc(name)
    if d and d["results"].get("mean_us") is not None:
        r = d["results"]
        print(f"{name}: mean {r['mean_us']:.1f} us, torch's group {r['backend']}, sharing daemon "
              f"{'yes' if r.get('sharing_daemon') else 'no'}, library NCCL "
              f"{r['library']['binding']['library_version']}, library env {r['library']['env']}, verdict {d['verdict']}")
EOF
}

for step_name in $steps; do
  case $step_name in
    env) step env env ;;
    nccl-tests) nccl_tests ;;
    storm) step library_storm storm --nproc 2 --per-device --engine both --iters 10000 ;;
    library-sweep) step library_sweep sweep --nproc 2 --per-device --engine library --ops all "${sizes[@]}" ;;
    torch-sweep) step torch_sweep sweep --nproc 2 --per-device --ops all "${sizes[@]}" ;;
    compare)
      compare compare_nccl_tests_library "$res/nccl_tests_all.txt" "$res/library_sweep.json" --tolerance 10%
      compare compare_nccl_tests_torch "$res/nccl_tests_all.txt" "$res/torch_sweep.json" --tolerance 10%
      compare compare_torch_library "$res/torch_sweep.json" "$res/library_sweep.json" --tolerance 10% ;;
    shared) shared ;;
    summary) summary | tee "$res/summary.txt" ;;
    *) echo "unknown step $step_name (valid: env nccl-tests storm library-sweep torch-sweep compare shared summary)"
       exit 2 ;;
  esac
done
leftovers
[ -n "${OUT:-}" ] && pack library-engine
