#!/usr/bin/env bash
# Slurm: run `ddplab check` on this node and drain it when the node is CRITICAL or cannot be judged.
#
#   slurm.conf, as the periodic health check (slurmd runs it as root; it must drain the node itself):
#     HealthCheckProgram=/etc/slurm/ddplab-healthcheck.sh
#     HealthCheckInterval=21600
#     HealthCheckNodeState=IDLE        # only when no job holds the GPUs: the check uses all of them
#   or as a prolog, before every job (a non-zero exit drains the node and requeues the job):
#     Prolog=/etc/slurm/ddplab-healthcheck.sh
#     PrologFlags=Alloc
#
# What an operator sees on a bad node (`sinfo -R`):
#   REASON                                             USER  TIMESTAMP            NODELIST
#   ddplab CRITICAL - 2 critical, 2 warning of 18 che  root  2026-12-01T18:22:40  gpu017
# and the whole status line and the report's path in /var/log/ddplab/healthcheck.log; `ddplab report
# /var/lib/ddplab/runs/<time>/report.json` draws the node's page again.
#
# slurmd kills a HealthCheckProgram that runs past 60 s. The check ends itself first: its --deadline (50 s by
# default, counted from ddplab's start) stops the running stage's ranks and says UNKNOWN, naming what was not run;
# that leaves 10 s to stop and write. A node whose check needs longer (8 GPUs) needs a larger DDPLAB_DEADLINE and a
# prolog rather than the health check.
#
# What each status does here: OK keeps the node; WARNING keeps it (DDPLAB_DRAIN_ON_WARNING=1 drains it);
# CRITICAL drains it with the status line as the reason; UNKNOWN (cannot run here, a bad thresholds file, a bug,
# stopped by a signal or the deadline) drains it too, with "DDPLAB UNKNOWN - <why>" as the reason: a node that
# could not be checked gets no job (DDPLAB_DRAIN_ON_UNKNOWN=0 keeps it, and only logs the line).
#
# Settings (environment): DDPLAB (the ddplab command), DDPLAB_THRESHOLDS (a thresholds file, optional),
# DDPLAB_DEADLINE (seconds, optional), DDPLAB_STATE (runs, textfile, log), DDPLAB_KEEP (runs to keep),
# DDPLAB_DRAIN_ON_WARNING=1, DDPLAB_DRAIN_ON_UNKNOWN=0.
set -u

DDPLAB=${DDPLAB:-ddplab}
STATE=${DDPLAB_STATE:-/var/lib/ddplab}
LOG=${DDPLAB_LOG:-/var/log/ddplab/healthcheck.log}
KEEP=${DDPLAB_KEEP:-20}
NODE=${SLURMD_NODENAME:-$(hostname -s)}
SCONTROL=${SCONTROL:-scontrol}

mkdir -p "$STATE/runs" "$(dirname "$LOG")"
out="$STATE/runs/$(date +%Y%m%dT%H%M%S)"
args=(check --format nagios --out "$out" --textfile-dir "$STATE/textfile")
if [ -n "${DDPLAB_THRESHOLDS:-}" ]; then args+=(--thresholds "$DDPLAB_THRESHOLDS"); fi
if [ -n "${DDPLAB_DEADLINE:-}" ]; then args+=(--deadline "$DDPLAB_DEADLINE"); fi

status=$("$DDPLAB" "${args[@]}" 2>>"$LOG")
rc=$?
line=$(printf '%s\n' "$status" | head -n 1)
summary=${line%% | *}   # the status line without its perfdata
printf '%s %s rc=%s %s (report: %s/report.json)\n' "$(date -Is)" "$NODE" "$rc" "$summary" "$out" >>"$LOG"

# Keep the last $KEEP runs.
ls -1dt "$STATE"/runs/*/ 2>/dev/null | tail -n +"$((KEEP + 1))" | xargs -r rm -rf

# Nagios exit codes: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN (bad usage, cannot run here, a bug, a stop).
drain=0
case $rc in
  0) drain=0 ;;
  1) [ "${DDPLAB_DRAIN_ON_WARNING:-0}" = 1 ] && drain=1 ;;
  2) drain=1 ;;
  *) [ "${DDPLAB_DRAIN_ON_UNKNOWN:-1}" = 1 ] && drain=1 ;;
esac
if [ "$drain" = 1 ]; then
  "$SCONTROL" update NodeName="$NODE" State=DRAIN Reason="${summary:0:200}"
  exit 1   # in a prolog: the job is requeued elsewhere
fi
exit 0
