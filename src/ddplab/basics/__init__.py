"""The bottom layer: helpers every other package may use, which import nothing of ddplab but errors and each
other. Writing files atomically and redacting secrets (``files``, ``redaction``), a run's directory (``rundir``),
the command line's option machinery every Config is declared with (``cli_options``, ``validators``, ``sizes``),
signals (``interrupts``), /proc reading (``proc_stat``), the environment (``env_vars``), the observer a library run
reports progress to (``observer``), torch's floor and numpy's warning (``torch_floor``, ``numpy_warning``)."""
