"""Jobs across machines: the parts that do not depend on the launcher's internals. Each module's
docstring says its part: ``endpoint`` (who hosts the job's c10d store and how the others reach it),
``launcher_env`` and ``launchers`` (what torchrun, srun or mpirun told this process, and the mistakes),
``status_store`` (each rank's status through the job's store), ``topology`` (which ranks share a machine).

Nothing here names a vendor; the platform layer supplies the socket-interface variables.
"""
