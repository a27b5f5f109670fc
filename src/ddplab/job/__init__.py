"""Supervise the user's own training job: `ddplab launch [torchrun options] -- script.py args`.

- ``run``: the library entry point: config.LaunchConfig -> the job's report (records/launch.py)
- ``torchrun_args``: torchrun's options (as commands/launch.py parsed them) -> elastic's launch configuration
- ``layout``: every path in the job directory; the variables ranks carry are rundir.py's
- ``boot``: what each rank runs before the user's code (guard, beacon, error record)
- ``beacon``: the side thread in each rank: heartbeat, progress, on-demand dumps
- ``flight``: read flight records and name the culprit ranks and the collective
- ``watch``: the launcher side: progress, hang declaration, dumps, teardown
- ``supervise``: one job through torch's elastic launcher with the watcher around it
- ``outcome``: the job's LaunchRecord, from what elastic, the watcher and each rank left behind
"""
