#!/usr/bin/env bash
# node-problem-detector custom plugin: `ddplab check --format npd`. NPD reads the exit code (0 OK, 1 problem,
# anything else unknown) and the first line of stdout (cut at max_output_length) as the condition's message;
# stderr (the check's progress) goes to NPD's log.
#
# The check uses every GPU of the node for about 30 s (60 s on 8): invoke it where no job runs then (an idle
# pool, a maintenance window), or set DDPLAB_FROM to a report a scheduled check wrote (the Slurm wrapper, the
# DaemonSet) and the plugin only judges that report again: no GPU, under a second.
#
# What an operator sees on a bad node (`kubectl describe node gpu017`):
#   Type                            Status  Reason             Message
#   CollectiveCommunicationProblem  True    DdplabCheckFailed  CRITICAL: 2 critical, 2 warning of 18 checks: env
#                                                              orphaned processes: 1 (expected 0); sweep collective
#                                                              results correct: #wrong 131072, errors 0 ...
# A WARNING keeps the condition False (exit 0) with its message starting "WARNING:".
set -u
DDPLAB=${DDPLAB:-/opt/ddplab/venv/bin/ddplab}
STATE=${DDPLAB_STATE:-/var/lib/ddplab}
args=(check --format npd)
if [ -n "${DDPLAB_THRESHOLDS:-}" ]; then args+=(--thresholds "$DDPLAB_THRESHOLDS"); fi
if [ -n "${DDPLAB_FROM:-}" ]; then
  exec "$DDPLAB" "${args[@]}" --from-report "$DDPLAB_FROM"
fi
mkdir -p "$STATE/runs"
exec "$DDPLAB" "${args[@]}" --out "$STATE/runs/npd-$(date +%Y%m%dT%H%M%S)" --textfile-dir "$STATE/textfile"
