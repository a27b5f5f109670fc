"""Loaded by every Python of a probe run (PYTHONPATH): logs each subprocess the process starts, with the time since
the Unix epoch, to $PROBE_LOG. Used by check_timeline.sh to see where `ddplab check` spends its time on a GPU."""
import os
import subprocess
import time

_log = os.environ.get("PROBE_LOG")
if _log:
    _popen_init = subprocess.Popen.__init__

    def _logged(self, args, *a, **kw):
        t0 = time.time()
        _popen_init(self, args, *a, **kw)
        with open(_log, "a") as f:
            f.write(f"{t0:.3f} pid {os.getpid()} -> {self.pid}: {str(args)[:200]}\n")

    subprocess.Popen.__init__ = _logged
