"""`ddplab launch`: run your own training script as torchrun would, and supervise it.

    ddplab launch --nproc-per-node 2 --hang-timeout 60 -- train.py --lr 0.1

Every torchrun option works (ddplab parses them with torchrun's own parser). Each rank
starts through ddplab's boot module (parent-death guard, heartbeat, flight recorder on,
stacks and flight records on request). When a rank raises, or when a rank waits and no
rank progresses for --hang-timeout seconds, ddplab collects every rank's stack and flight
record, names the culprit ranks and the collective, tears the ranks down and writes
<job dir>/report.json. Exit code: 0 when the job succeeded, 1 when it failed or hung,
2 for bad input (nothing started), 3 when this machine cannot run it.
"""

from __future__ import annotations

import argparse

SUMMARY = "run your own training script as torchrun would, and name the rank that fails or hangs it"

# Every word after `launch` is torchrun's (or the script's): no option of ddplab's own parser
# may claim one, so the subparser treats them all as positional and torchrun's parser reads them.
PARSER_OPTIONS = {"add_help": False, "prefix_chars": "\0"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("launch_argv", nargs=argparse.REMAINDER, metavar="[torchrun options] -- script.py [args]")


def validate(args) -> None:
    from ..job.torchrun_args import parse

    args.request = parse(args.launch_argv)


def main(args, console) -> int:
    from .. import report
    from ..job import flight
    from ..job.layout import JobDir, write_json_atomically
    from ..job.outcome import build_report
    from ..job.supervise import expected_ranks, gather_evidence, run_job

    request = args.request
    job = JobDir.create(request.out)
    console.print(f"ddplab launch: job directory {job.path}", markup=False, highlight=False)
    outcome = run_job(request, job)
    evidence = gather_evidence(request, outcome)
    verdict = None
    if not outcome.ok:
        verdict = flight.name_culprits(evidence, expected_ranks(request),
                                       now=(outcome.hang or {}).get("declared_at"))
    doc = build_report(request, outcome, evidence, verdict)
    write_json_atomically(job.report_file, doc)
    render(doc, console)
    return int(report.exit_code(doc["verdict"]))


def render(doc: dict, console) -> None:
    r = doc["results"]
    say = lambda text: console.print(text, markup=False, highlight=False)  # noqa: E731 (sizes look like markup)
    say(f"ddplab launch: {r['outcome'].upper()} in {r['duration_s']:.1f} s")
    culprit = r["culprit"]
    if culprit:
        say(f"  culprit: {culprit['reason']}")
        for line in culprit["evidence"]:
            say(f"    {line}")
        say(f"  torchrun would blame rank {r['torchrun_root_cause_rank']}; flight-recorder analysis by "
            f"{'torch' if culprit['analyzer'].get('status') == 'used' else 'ddplab'} "
            f"(torch's analyzer: {culprit['analyzer'].get('status')})")
    for rank in r["ranks"]:
        if rank["error"]:
            say(f"  rank {rank['rank']} raised {rank['error']['type']}: {rank['error']['message'][:200]}")
    if r["stacks"]:
        say(f"  stacks: {', '.join(r['stacks'].values())}")
    say(f"  left running: {len(r['left_running'])} process(es); report: {r['job_dir']}/report.json")
