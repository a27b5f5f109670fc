#!/usr/bin/env bash
# Install ddplab and what it needs into the given Python (default python3).
# torch: an installed one is kept (GPU images bring their own); otherwise 2.13.0 is asked
# for first, which on CPU machines with a local wheel cache is the CPU build.
set -euo pipefail
py=${1:-python3}
cd "$(dirname "$0")/.."
if ! "$py" -c "import torch" >/dev/null 2>&1; then
  "$py" -m pip install -q "torch==2.13.0" || "$py" -m pip install -q "torch>=2.4"
fi
"$py" -m pip install -q -e ".[test]"
