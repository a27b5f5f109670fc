"""The judge's culprit for a job a test watched with a Watcher of its own (no elastic, stand-in ranks): what
supervision/job.py's run_job names once such a job ended."""

from ddplab.supervision.job import judge_job
from ddplab.supervision.states import read_states


def culprit_of(run, watcher, nproc: int):
    states = {**watcher.job_states, **read_states(run)}
    return judge_job(run, watcher, nproc, states, {})[1]
