#!/usr/bin/env bash
# Issue 9 §4 re-checked on 2x H200: is the one size >= 16 MiB that round A found 3.5 % slower than nccl-tests
# (16 MiB, 77.3 vs 80.0 us) ddplab's, or run-to-run noise? Three alternating pairs of nccl-tests all_reduce_perf
# and ddplab sweep over 16 MiB..4 GiB, each pair compared with `ddplab compare --tolerance 3%`.
# Needs nccl-tests built by the device call into /tmp/nccl-tests-build (see round_a.sh).
#   RES=/tmp/r/s bash scripts/device/sweep_recheck.sh      (results packed into $OUT/sweep_recheck.tgz)
source scripts/device/common.sh
for i in 1 2 3; do
  LD_LIBRARY_PATH=/tmp/nccl-link/lib timeout 120 /tmp/nccl-tests-build/all_reduce_perf -b 16M -e 4G -f 2 -g 2 \
    > "$res/nccl_tests_$i.txt" 2>&1
  step sweep_$i sweep --nproc 2 --per-device -b 16M -e 4G -f 2
  $py -m ddplab compare "$res/nccl_tests_$i.txt" "$res/sweep_$i.json" --tolerance 3% --json "$res/compare_$i.json" \
    > "$res/compare_$i.txt" 2>&1
  echo "pair $i: compare rc=$? :: $(tail -1 "$res/compare_$i.txt")"
  grep -E "^ +all_reduce +(16777216|33554432) " "$res/compare_$i.txt"
done
leftovers
tar czf "$OUT/sweep_recheck.tgz" -C "$res" .
