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
