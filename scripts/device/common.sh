# Sourced by the device scripts: environment, a step runner, and where results go.
set -u
res=${RES:-/tmp/ddplab-results}
mkdir -p "$res"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 COLUMNS=160
py=python3
step() {  # step NAME ARGS...: run `ddplab ARGS --json $res/NAME.json`, log to $res/NAME.log
  local name=$1; shift
  local t0=$SECONDS
  $py -m ddplab "$@" --json "$res/$name.json" > "$res/$name.log" 2>&1
  local rc=$?
  echo "$name: rc=$rc $((SECONDS - t0))s :: ddplab $*"
  tail -1 "$res/$name.log"
}
leftovers() {
  ps -eo pid,ppid,cmd | grep -E "ddplab|spawn_main|nvidia-cuda-mps" | grep -v grep || echo "no ddplab processes or MPS daemons left"
}
pack() {  # bring everything back as one file (the device tool returns at most 8)
  tar czf "$OUT/$1.tgz" -C "$res" .
}
nccl_over_torchs() {  # NCCL=/path/libnccl.so.2 (a carried 2.30.x): copied over every libnccl torch's venv holds
  [ -n "${NCCL:-}" ] || return 0
  local root lib
  root=$($py -c "import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))")
  for lib in $(find "$root" / -xdev -name 'libnccl.so*' -type f 2>/dev/null | grep -v "^/tmp/nccl" | sort -u); do
    cp "$NCCL" "$lib" && echo "NCCL copied over $lib"
  done
}
