#!/usr/bin/env bash
# CI's compatibility check on the oldest torch ddplab supports (torch_floor.FLOOR, pyproject's torch>=): a fresh
# virtual environment with that release from PyPI (a CUDA build with its nvidia-* libraries: about 3.5 GB to
# download, 5 GB installed; it runs on the CPU), then `ddplab run` (quick profile) and one supervised job that
# goes wrong (`ddplab launch`, 2 ranks, --hang-timeout 5): every check of scripts/torch_matrix.py must hold.
# .ci/run calls it after the main suite, so the suite's time is untouched; it took 200 s on the 2-core machine at
# load 4 to 7 (docs/RESULTS.md, "the torch releases clusters pin"). The environment lives outside the checkout
# and is removed afterwards.
#
# COMPAT_TORCH   the release (default: the floor's, which tests/unit/test_torch_floor.py keeps at the floor)
# COMPAT_CASE    the launch case, an examples/ script (default rank_exception: its culprit is named right on every
#                supported torch; skipped_collective and user_deadlock are named right only with the gloo flight
#                recorder, which torch has from 2.8, until the judge reads the ranks' stacks without it: see
#                docs/RESULTS.md, "the torch releases clusters pin")
# COMPAT_DIR     where the environment and the runs go (default /tmp/ddplab-compat)
# COMPAT_BUDGET_S  nothing new starts after this long (default 900 s)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${COMPAT_DIR:-/tmp/ddplab-compat}
started=$(date +%s)
python3 scripts/torch_matrix.py --torch "${COMPAT_TORCH:-2.4.1}" --case "${COMPAT_CASE:-rank_exception}" \
  --root "$dir" --json "$dir/compat.json" --budget-s "${COMPAT_BUDGET_S:-900}" --strict --table
echo "compat: torch ${COMPAT_TORCH:-2.4.1} checked in $(( $(date +%s) - started )) s"
