"""`ddplab check`: a node acceptance check that speaks the languages platform teams already run.

    runner.py      the check as a library: env -> the check's stages (plan.py) -> judge (judge.py) -> CheckRecord
    plan.py        the stages: a short storm, a sweep of four collectives at a few sizes, the copy ceiling, one
                   kill_rank drill, and pairwise between machines with --nnodes
    thresholds.py  expectations as data: a TOML file of busbw and latency bounds per machine type
    baseline.py    expectations from a good node's report: --baseline report.json --tolerance 5%
    rules.py       bounds and the built-in defaults -> rows with their numbers (Readings)
    judge.py       the stages' own checks and the rules -> one status per check and for the node
    inject.py      faults put in on purpose (hidden --inject): a slow row, a wrong row, a leftover process
    formats/       what each runner reads, all from one CheckRecord: nagios, npd, prometheus, junit, text

The stages are the lab's measurements, run as `ddplab run` runs them (lab/run.py); nothing here re-implements one.
"""

COMMAND = "check"
