"""A module whose import never ends: what the victim of the "hang_in_import" and "stop_in_import" faults imports
(drills/faults.py). Importing it hangs (a plug-in that waits for a lock at import, a mount that never answers), or
stops the process (SIGSTOP) inside the import."""

import os
import signal
import time

if os.environ.get("DDPLAB_DRILL_IMPORT_FAULT") == "stop_in_import":
    os.kill(os.getpid(), signal.SIGSTOP)
while True:
    time.sleep(3600)
