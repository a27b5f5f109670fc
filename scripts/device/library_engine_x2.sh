#!/usr/bin/env bash
# Issue 14 on 2x H200: the library engine (NCCL called through nccl4py's bindings layer, on the libnccl torch
# loaded) against the torch engine and nccl-tests, back to back, one rank per GPU.
#
#   bash scripts/device/library_engine_x2.sh [STEP...]    (from the repository root; default: every step)
#
# Steps: storm (4-byte all_reduce, 10,000 calls pipelined and 1,000 blocking, library and torch alternating),
# library-sweep (all 7 collectives 8 B..1 GiB through the binding), torch-sweep (`ddplab sweep`, the same sizes),
# nccl-tests (built here from the carried source, all 7 binaries 8 B..1 GiB, -g 2), compare.
# Needs: the nccl4py wheel in .whl/ (nccl4py-0.6.0-cp312-...whl; cuda-core, cuda-bindings, cuda-pathfinder and
# numpy are in the image); for nccl-tests its source in $NCCL_TESTS_SRC (default .devcarry/nccl-tests).
# Results: $RES (default /tmp/ddplab-results) and, packed, $OUT/library-engine.tgz.
source scripts/device/common.sh
steps=${*:-storm library-sweep torch-sweep nccl-tests compare}
sizes=(-b 8 -e 1G -f 2)

python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .whl/nccl4py-*.whl || { echo "nccl4py wheel missing in .whl/"; exit 3; }
export PYTHONPATH=$PYTHONPATH:/tmp/site  # after src/: ddplab from this tree, nccl4py beside the image's packages

$py - <<'PY' 2>&1 | tee "$res/versions.log"
import torch
from ddplab import platform
from ddplab.platform.library_binding import binding_status
p = platform.detect(with_memory=False)
print("torch", torch.__version__, "gpus", torch.cuda.device_count(), "NCCL built", p.collective_built_version,
      "loaded", p.collective_loaded_version, "at", p.collective_loaded_path)
print("binding:", binding_status(p).to_dict())
PY

bench() {  # bench NAME ARGS...: the library engine, 2 ranks (one per GPU) under ddplab launch
  local name=$1; shift
  local t0=$SECONDS
  timeout 900 $py -m ddplab launch --nproc-per-node 2 --hang-timeout 120 --out "$res/$name-job" -- \
    scripts/device/library_engine_bench.py --json-dir "$res" "$@" > "$res/$name.log" 2>&1
  local rc=$?
  echo "$name: rc=$rc $((SECONDS - t0))s"
  return $rc
}

nccl_tests() {  # build nccl-tests against torch's libnccl (its headers ship in the same wheel), run -g 2
  local src=${NCCL_TESTS_SRC:-.devcarry/nccl-tests}
  [ -d "$src/src" ] || { echo "nccl-tests: no source in $src, skipped"; return 0; }
  local nccl_dir lib=/tmp/nccl-link
  nccl_dir=$($py -c "import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))" 2>/dev/null) ||
    nccl_dir=$($py -c "import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])")
  mkdir -p $lib/lib
  ln -sf "$nccl_dir"/lib/libnccl.so.* $lib/lib/ && ln -sf "$nccl_dir"/lib/libnccl.so.2 $lib/lib/libnccl.so
  ln -sfn "$nccl_dir/include" $lib/include
  local t0=$SECONDS
  make -C "$src" -j 32 MPI=0 CUDA_HOME="$(dirname "$(dirname "$(command -v nvcc)")")" NCCL_HOME=$lib \
    BUILDDIR=/tmp/nccl-tests-build NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" \
    > "$res/nccl_tests_build.log" 2>&1 ||
    { echo "nccl-tests: build failed"; tail -5 "$res/nccl_tests_build.log"; return 1; }
  echo "nccl-tests: built in $((SECONDS - t0))s"
  for bin in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
    LD_LIBRARY_PATH=$lib/lib timeout 300 /tmp/nccl-tests-build/${bin}_perf "${sizes[@]}" -g 2 \
      > "$res/nccl_tests_$bin.txt" 2>&1
    echo "nccl-tests $bin: rc=$? $(grep 'Avg bus' "$res/nccl_tests_$bin.txt")"
  done
  cat "$res"/nccl_tests_*.txt > "$res/nccl_tests_all.txt"
}

for step in $steps; do
  case $step in
    storm) bench library_storm --storm 10000 --per-op 1000 || break
           grep "^# \(binding\|storm\)" "$res/library_storm.log" ;;
    library-sweep) bench library_sweep --ops all "${sizes[@]}" || break
                   grep "^# \(Out of\|Avg\|ERROR\)" "$res/library_sweep.log" ;;
    torch-sweep) step torch_sweep sweep --nproc 2 --per-device --ops all "${sizes[@]}" ;;
    nccl-tests) nccl_tests ;;
    compare)  # B = library engine against A = nccl-tests (target: within 10 %) and A = the torch engine
      [ -s "$res/nccl_tests_all.txt" ] && $py -m ddplab compare "$res/nccl_tests_all.txt" "$res/library_sweep.json" \
        --tolerance 10% --json "$res/compare_nccl_tests_library.json" > "$res/compare_nccl_tests_library.txt" 2>&1
      echo "library vs nccl-tests: rc=$? $(tail -1 "$res/compare_nccl_tests_library.txt" 2>/dev/null)"
      [ -s "$res/torch_sweep.json" ] && $py -m ddplab compare "$res/torch_sweep.json" "$res/library_sweep.json" \
        > "$res/compare_torch_library.txt" 2>&1
      echo "library vs torch: rc=$? $(tail -1 "$res/compare_torch_library.txt" 2>/dev/null)" ;;
    *) echo "unknown step $step (valid: storm library-sweep torch-sweep nccl-tests compare)"; exit 2 ;;
  esac
done
leftovers
[ -n "${OUT:-}" ] && pack library-engine
