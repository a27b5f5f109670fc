"""A drill that killed a launcher waits for that launcher's guardian to finish its sweep before it looks for what
was left: once the drill command exited while the guardian still ran (test_node_drills_netns, kill_node)."""

import subprocess
import sys
import time

from ddplab.supervision import guardian


def test_the_guardian_of_a_run_is_found_by_its_run_and_waited_for_until_it_ends(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", guardian.MODULE, str(run_dir), "run-1"], stdin=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30  # until the child has exec'd: before that its command line is pytest's
        while guardian.still_running(run_dir, "run-1") != [proc.pid] and time.monotonic() < deadline:
            time.sleep(0.02)
        assert guardian.still_running(run_dir, "run-1") == [proc.pid]
        assert guardian.still_running(run_dir, "run-2") == [] and guardian.still_running(tmp_path, "run-1") == []
        assert not guardian.wait_finished(run_dir, "run-1", 0.2)  # still waiting on its launcher's pipe
        proc.stdin.close()  # the launcher died: end of file, the guardian sweeps, writes what it did and exits
        assert guardian.wait_finished(run_dir, "run-1", 10) and (run_dir / "guardian.json").exists()
        assert proc.wait(timeout=5) == 0  # (a zombie until here: its command line is gone, it is not at work)
    finally:
        proc.kill()
        proc.wait()
