"""What belongs to the user's own training job under `ddplab launch [torchrun options] -- script.py args`; its
supervision is every job's (ddplab/supervision/).

- ``run``: the library entry point: config.UserJobConfig -> the job's report (records/launch.py)
- ``torchrun_args``: torchrun's options (as commands/launch.py parsed them) -> elastic's launch configuration
- ``boot``: what each rank runs before the user's code (guard, beacon, error record), then the user's code
- ``supervise``: the user's job as a supervised job (where it listens, elastic's configuration, the sampler)
- ``ras``: asking the collective library's RAS service on a declared hang (--ras)
- ``outcome``: the job's LaunchRecord, from the supervised job's outcome
"""
