"""The rank's beacon (supervision/beacon.py): it looks at torch.distributed without importing it, at any moment
of the main thread's `import torch` (a half-imported module reads as "not in a process group"; on 2x H200 every
rank of every supervised job once wrote beacon-error.txt with an AttributeError), and its own files never fail
the rank (issue 18: a full disk failed a job that had finished)."""

import json
import sys
import types

from ddplab.basics.rundir import RunDir
from ddplab.supervision.beacon import Beacon


def _beacon(tmp_path) -> Beacon:
    return Beacon(RunDir.create(tmp_path / "job", "launch"), 0, 0, phase="running")


def test_a_half_imported_torch_distributed_is_not_a_process_group(tmp_path, monkeypatch):
    half_imported = types.ModuleType("torch.distributed")  # what sys.modules holds mid-import: no functions yet
    monkeypatch.setitem(sys.modules, "torch.distributed", half_imported)
    assert _beacon(tmp_path)._observe()["in_process_group"] is False


def test_an_initialised_process_group_is_seen(tmp_path, monkeypatch):
    ready = types.ModuleType("torch.distributed")
    ready.is_available = lambda: True
    ready.is_initialized = lambda: True
    monkeypatch.setitem(sys.modules, "torch.distributed", ready)
    assert _beacon(tmp_path)._observe()["in_process_group"] is True


def test_a_phase_is_written_atomically_with_what_the_beacon_sees(tmp_path):
    beacon = _beacon(tmp_path).start()
    try:
        beacon.phase("finished", exit_code=0)
        written = json.loads(beacon.path.read_text())
        assert (written["phase"], written["exit_code"], written["rank"]) == ("finished", 0, 0)
        assert written["where"]["frames"] and written["proc_start_ticks"] > 0
    finally:
        beacon.close()


def test_a_write_that_fails_degrades_supervision_never_the_rank(tmp_path, capsys):
    run = RunDir.create(tmp_path / "job", "launch")
    (run.ranks_dir / "0").write_text("a file where the rank's directory should be")  # every write under it fails
    beacon = Beacon(run, 0, 0, phase="running").start()  # no exception: the job goes on
    try:
        beacon.phase("in-collective")
        beacon.fail("RuntimeError: boom", 1)
        beacon.dump("req1")
        assert beacon.write_error is not None
        said = capsys.readouterr().err
        assert said.count("could not write its supervision files") == 1  # said once, not at every beat
    finally:
        beacon.close()


def _module(path, text: str):
    """A module loaded from ``path``: frames whose file is where torch.distributed's would be."""
    import importlib.util

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem + str(abs(hash(path))), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_where_names_the_users_call_not_elastics_wrapper_of_the_whole_rank(tmp_path):
    """A lab rank runs as elastic's function entrypoint: elastic's ``_wrap`` (under torch/distributed) is the
    outermost frame of its whole run, and was taken for the call every rank was in ("every rank in _wrap")."""
    from ddplab.supervision.beacon import locate

    distributed = tmp_path / "torch" / "distributed"
    c10d = _module(distributed / "distributed_c10d.py", "def all_reduce(then):\n    return then()\n")
    logger = _module(distributed / "c10d_logger.py", "def wrapper(call, then):\n    return call(then)\n")
    elastic = _module(distributed / "elastic" / "multiprocessing" / "api.py", "def _wrap(fn):\n    return fn()\n")
    user = _module(tmp_path / "train.py", "import sys\n\ndef step(c10d, logger):\n"
                                          "    return logger.wrapper(c10d.all_reduce, lambda: sys._getframe())\n\n"
                                          "def compute():\n    return sys._getframe()\n")
    in_collective = locate(elastic._wrap(lambda: user.step(c10d, logger)), str(distributed) + "/")
    assert in_collective.torch_call == "all_reduce"
    assert in_collective.call_site.startswith(f"{tmp_path / 'train.py'}:4 in step")
    in_own_code = locate(elastic._wrap(user.compute), str(distributed) + "/")
    assert in_own_code.torch_call is None and in_own_code.call_site is None


def test_a_module_of_torch_distributed_being_imported_is_no_call(tmp_path):
    """`import torch.distributed` runs its modules' own code: under load that took seconds, and the rank was read as
    waiting in a collective named "<module>", which declared a hang of two ranks still importing."""
    from ddplab.supervision.beacon import locate

    distributed = tmp_path / "torch" / "distributed"
    user = _module(tmp_path / "train.py", "import importlib.util, sys\n\n"
                                          "def load(path):\n"
                                          "    spec = importlib.util.spec_from_file_location('dist_mod', path)\n"
                                          "    module = importlib.util.module_from_spec(spec)\n"
                                          "    spec.loader.exec_module(module)\n"
                                          "    return module.FRAME\n")
    (distributed).mkdir(parents=True)
    (distributed / "distributed_c10d.py").write_text("import sys\n\ndef _register():\n    return sys._getframe()\n\n"
                                                     "FRAME = _register()\n")  # a function its import calls
    where = locate(user.load(distributed / "distributed_c10d.py"), str(distributed) + "/")
    assert where.torch_call is None and where.call_site is None, where


def test_a_heartbeat_observed_before_the_final_phase_does_not_overwrite_it(tmp_path):
    """The side thread's heartbeat observes and writes under one lock: a final phase() written while a beat was
    observing would otherwise be followed by that beat's older progress, and the judge reads the last write."""
    import threading

    beacon = _beacon(tmp_path)
    real, held, go = beacon._observe, threading.Event(), threading.Event()

    def observe():
        if threading.current_thread() is beacon._thread:  # the heartbeat, paused between observing and writing
            stale = dict(real(), progress={"0": 4}, where="stale")
            held.set()
            go.wait(5)
            return stale
        return dict(real(), progress={"0": 5}, where="final")

    beacon._observe = observe
    beacon.start()
    assert held.wait(5)
    final = threading.Thread(target=beacon.phase, args=("finished",))
    final.start()
    go.set()
    final.join(5)
    beacon.close()
    status = json.loads(beacon.path.read_text())
    assert (status["phase"], status["progress"], status["where"]) == ("finished", {"0": 5}, "final")
