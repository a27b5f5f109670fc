#!/usr/bin/env bash
# Issue 28 on one GPU: `ddplab check` under its default --deadline (50 s, for Slurm's 60 s HealthCheckProgram
# limit) five times: each run's exit code, status, wall time from the start of the process and the check's own
# duration. Then one check stopped by SIGTERM while its sweep's ranks run, and one ended by a 15 s deadline: how
# long each took to end, its status line, and what was left running. RUNS=N STOPS=0: N timed runs only.
source scripts/device/common.sh
nvidia-smi -L

for run in $(seq 1 "${RUNS:-5}"); do
  t0=$(date +%s%3N)
  $py -m ddplab check --out "$res/run$run" --format nagios > "$res/run$run.nagios" 2> "$res/run$run.log"
  rc=$?
  echo "run $run: rc=$rc wall $(( $(date +%s%3N) - t0 )) ms; $(head -1 "$res/run$run.nagios" | cut -d'|' -f1)"
  $py -c "
import json, sys
r = json.load(open(sys.argv[1]))['results']
print('   ', r['status'], r['duration_s'], 's; stages:', ', '.join(f\"{s['name']} {s.get('duration_s')}\" for s in r['stages']))
" "$res/run$run/report.json"
done

[ "${STOPS:-1}" = 1 ] || { leftovers; pack check_deadline; exit 0; }  # STOPS=0: the timed runs only

# SIGTERM once the sweep's ranks run
t0=$(date +%s%3N)
$py -m ddplab check --out "$res/sigterm" --format nagios > "$res/sigterm.nagios" 2> "$res/sigterm.log" &
pid=$!
for _ in $(seq 1 600); do
  [ -d "$res/sigterm/sweep" ] && pgrep -P "$pid" -f spawn_main > /dev/null && break
  sleep 0.05
done
kill -TERM "$pid"; t1=$(date +%s%3N)
wait "$pid"; rc=$?
echo "sigterm: rc=$rc, SIGTERM at $(( t1 - t0 )) ms, exit $(( $(date +%s%3N) - t1 )) ms after it"
head -3 "$res/sigterm.nagios" | cut -c1-400
leftovers

t0=$(date +%s%3N)
$py -m ddplab check --out "$res/deadline" --format npd --deadline 15 > "$res/deadline.npd" 2> "$res/deadline.log"
echo "deadline 15: rc=$? wall $(( $(date +%s%3N) - t0 )) ms; $(cut -c1-300 "$res/deadline.npd")"
leftovers
pack check_deadline
