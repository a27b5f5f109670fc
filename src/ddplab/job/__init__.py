"""A job's ranks and their launch: `ddplab launch` (run, torchrun_args, boot, supervise, ras, outcome: the user's
own script) and the lab's sessions (session, session_record, policy, worker); the supervision is every job's
(ddplab/supervision/).
"""
