"""Jobs across machines (issue 13): the parts that do not depend on the launcher's internals.

- ``endpoint``: whether this machine hosts the job's c10d store, where it listens, which
  interface the collectives use, and the clear error when nothing answers at the endpoint.
- ``launchers``: what torchrun, srun or mpirun told this process, and the mistake of N
  independent world-size-1 jobs, in words.
- ``status_store``: each rank's status published through the job's own store, read by global
  rank from any machine.
- ``topology``: which ranks share a machine; the groups that tell them apart; the order in
  which to test machine pairs.

Nothing here names a vendor; the platform layer supplies the socket-interface variables.
"""
