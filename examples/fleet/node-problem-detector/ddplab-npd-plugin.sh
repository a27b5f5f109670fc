#!/usr/bin/env bash
# node-problem-detector custom plugin: `ddplab check --format npd`, for the two rules of ddplab-check-monitor.json.
#
# What NPD does with a plugin's result (its custompluginmonitor package): exit 1 sets the rule's condition True,
# with the rule's reason and the first 512 bytes of stdout (max_output_length) as the message; exit 0 sets it
# False with the condition's default reason and message, and throws stdout away; any other exit (2 is the
# protocol's Unknown) sets it Unknown with the default reason and stdout as the message. stderr (the check's
# progress) goes to NPD's log.
#
#   ddplab-npd-plugin.sh check     runs the check (exit 0 OK or WARNING, 1 CRITICAL, 2 UNKNOWN) and keeps its
#                                  line and exit code in $DDPLAB_STATE/npd-last
#   ddplab-npd-plugin.sh warning   reads that line back: exit 1 when the node was WARNING, so that the warning
#                                  reaches a condition of its own (NPD drops the output of an exit 0); under a
#                                  second. With concurrency 1 NPD runs the rules in order, so it reads this round's.
#
# What an operator sees (`kubectl describe node gpu017`), by the node's status:
#   OK        CollectiveCommunicationProblem   False    DdplabCheckNotCritical  ddplab check found no critical problem
#             CollectiveCommunicationDegraded  False    DdplabCheckNoWarning    ddplab check found nothing degraded
#   WARNING   CollectiveCommunicationProblem   False    DdplabCheckNotCritical  ddplab check found no critical problem
#             CollectiveCommunicationDegraded  True     DdplabCheckWarning      WARNING: 1 warning of 22 checks: ...
#   CRITICAL  CollectiveCommunicationProblem   True     DdplabCheckCritical     CRITICAL: 2 critical, 2 warning of 18
#                                                                               checks: env orphaned processes: 1 ...
#   UNKNOWN   CollectiveCommunicationProblem   Unknown  DdplabCheckNotCritical  UNKNOWN: 1 unknown of 11 checks: check
#                                                                               completed: stopped by its 50 s deadline ...
#             CollectiveCommunicationDegraded  Unknown  DdplabCheckNoWarning    UNKNOWN: ...
# NPD gives False and Unknown the same reason (the condition's default), so the default reasons say only what is
# true of both ("not critical", "no warning"); the message says UNKNOWN and why.
#
# The check uses every GPU of the node for about 30 s (60 s on 8; ddplab ends it at its --deadline, 50 s by
# default, which DDPLAB_DEADLINE changes): invoke it where no job runs then (an idle pool, a maintenance window),
# or set DDPLAB_FROM to a report a scheduled check wrote (the Slurm wrapper, the DaemonSet) and the plugin only
# judges that report again: no GPU, under a second.
set -u
DDPLAB=${DDPLAB:-/opt/ddplab/venv/bin/ddplab}
STATE=${DDPLAB_STATE:-/var/lib/ddplab}
LAST="$STATE/npd-last"
mode=${1:-check}

if [ "$mode" = warning ]; then
  if [ ! -r "$LAST" ]; then
    echo "UNKNOWN: no ddplab check has run yet ($LAST is missing)"
    exit 2
  fi
  { read -r rc; read -r line; } < "$LAST"
  case $rc in
    0) if [ "${line#WARNING: }" != "$line" ]; then echo "$line"; exit 1; fi; exit 0 ;;
    1) exit 0 ;;   # CRITICAL: the problem condition says it
    *) echo "$line"; exit 2 ;;
  esac
fi

args=(check --format npd)
if [ -n "${DDPLAB_THRESHOLDS:-}" ]; then args+=(--thresholds "$DDPLAB_THRESHOLDS"); fi
if [ -n "${DDPLAB_DEADLINE:-}" ]; then args+=(--deadline "$DDPLAB_DEADLINE"); fi
mkdir -p "$STATE/runs"
if [ -n "${DDPLAB_FROM:-}" ]; then
  line=$("$DDPLAB" "${args[@]}" --from-report "$DDPLAB_FROM")
else
  line=$("$DDPLAB" "${args[@]}" --out "$STATE/runs/npd-$(date +%Y%m%dT%H%M%S)" --textfile-dir "$STATE/textfile")
fi
rc=$?
line=$(printf '%s\n' "$line" | head -n 1)
printf '%s\n%s\n' "$rc" "$line" > "$LAST.tmp" && mv "$LAST.tmp" "$LAST"   # the warning rule's, whole or not at all
printf '%s\n' "$line"
exit "$rc"
