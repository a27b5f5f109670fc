"""Supervision of every multi-rank job ddplab runs (a lab stage, a drill, the user's own script under
`ddplab launch`): one package, so that a drill that passes proves what a user's job gets.

- ``elastic``   the one call into torch.distributed.elastic (torchrun's engine), with ddplab owning Ctrl+C
- ``rank``      a rank's life around its code: parent-death guard, faulthandler, beacon, its error recorded
- ``beacon``    the side thread in each rank: status, heartbeat, where the main thread is, dumps on request
- ``states``    the state rules: progress, who waits, who is behind, as the ranks' statuses say
- ``flight``    the flight-record rules: behind, desync, torch's own analyzer
- ``watcher``   the launcher's side: hang declaration, dumps and stacks, ending the job's processes
- ``exits``     how and when each rank's process ended (the order of deaths is evidence), OOM kills
- ``family``    every process the job started, ended with it on every path
- ``guardian``  the small process that ends what is left when the launcher is SIGKILLed
- ``evidence``  what each rank left behind, typed, for the judge
- ``judge``     one ordered list of rules: the culprit
- ``job``       one job from meeting to culprit (``run_job``), shared by the lab and `ddplab launch`

Nothing here imports torch at module level: the guardian starts with the standard library alone.
"""
