#!/usr/bin/env bash
# Install ddplab and what it needs into the interpreter given (the Makefile passes the active virtual
# environment's python, or the project's .venv/bin/python). A missing project .venv is created first, with the
# base interpreter's packages visible (--system-site-packages), so a GPU image's own torch build is used as is.
# torch: an importable one is kept; otherwise 2.13.0 is asked for first, which on CPU machines with a local
# wheel cache is the CPU build.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${1:-.venv/bin/python}
base=${BASE_PYTHON:-python3}

if [ ! -x "$py" ]; then
  venv=$(dirname "$(dirname "$py")")
  if [ "$venv" != "$(pwd)/.venv" ] && [ "$venv" != ".venv" ]; then
    echo "setup: $py does not exist (is the virtual environment in VIRTUAL_ENV still there?)" >&2
    exit 2
  fi
  echo "setup: creating the project's virtual environment in .venv (from $base)"
  if ! "$base" -m venv --system-site-packages .venv; then
    # Debian/Ubuntu ship venv separately (python3-venv); install it when we may.
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      rm -rf .venv
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
      "$base" -m venv --system-site-packages .venv
    else
      echo "setup: could not create .venv; install your distribution's python3-venv package, or activate a" \
           "virtual environment and run make again" >&2
      exit 3
    fi
  fi
fi

if ! "$py" -c "import torch" >/dev/null 2>&1; then
  "$py" -m pip install -q "torch==2.13.0" || "$py" -m pip install -q "torch>=2.4"
fi
"$py" -m pip install -q -e ".[test]"
# Byte-compile ddplab's source (an editable install leaves it uncompiled): every launcher and rank imports it, and
# where PYTHONDONTWRITEBYTECODE is set, as on this project's 2-core test machine, each of them compiled it again
# (the suite took 597 s from a fresh clone, 527 s with the source compiled).
"$py" -m compileall -q src tests >/dev/null
