"""Supervise the user's own training job: `ddplab launch [torchrun options] -- script.py args`.

- ``torchrun_args``: torchrun's own parser and LaunchConfig, plus ddplab's few options
- ``layout``: every path in the job directory and every environment variable, in one place
- ``boot``: what each rank runs before the user's code (guard, beacon, error record)
- ``beacon``: the side thread in each rank: heartbeat, progress, on-demand dumps
- ``flight``: read flight records and name the culprit ranks and the collective
- ``watch``: the launcher side: progress, hang declaration, dumps, teardown
- ``supervise``: one job through torch's elastic launcher with the watcher around it
- ``outcome``: the report of one job (one function, to move onto typed records later)
"""
