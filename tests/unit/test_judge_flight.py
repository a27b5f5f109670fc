"""Naming culprits from flight records, heartbeats and exits, without processes: the one judge
(supervision/judge.py) over evidence built the way supervision/evidence.py gathers it.

The fixtures under tests/fixtures/flight are real dumps from torch 2.13 (CPU, gloo): two
ranks, rank 1 stuck in its own code after 3 all_reduces while rank 0 waits in the 4th. Their
pg_config has an empty group name, which makes torch's analyzer raise KeyError.
"""

import copy
import json
import pickle
from pathlib import Path

import pytest
import torch

from ddplab.records.codec import to_json
from ddplab.records.supervision import GroupProgress, Hang, RankEnd, RankError, RankState, Where
from ddplab.supervision import flight, judge
from ddplab.supervision.evidence import RankEvidence as Evidence
from ddplab.supervision.evidence import load_record

FIXTURES = Path(__file__).parent.parent / "fixtures" / "flight"


def gloo_dump(rank: int) -> dict:
    return json.loads((FIXTURES / f"gloo-2.13-rank{rank}.json").read_text())


def with_named_group(record: dict) -> dict:
    """The same dump as a recorder that names its groups writes it (what the analyzer expects)."""
    record = copy.deepcopy(record)
    record["pg_config"] = {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}}
    return record


def entry(seq: int, sizes=((1024,),), op="all_reduce", pg=0) -> dict:
    return {"collective_seq_id": seq, "p2p_seq_id": 0, "op_id": seq, "record_id": seq - 1, "pg_id": pg,
            "process_group": [str(pg), "default_pg"], "profiling_name": f"gloo:{op}", "is_p2p": False,
            "input_sizes": [list(s) for s in sizes], "output_sizes": [list(s) for s in sizes],
            "input_dtypes": ["Float"], "output_dtypes": ["Float"], "state": "scheduled", "retired": True,
            "time_created_ns": seq, "time_discovered_started_ns": 0, "time_discovered_completed_ns": 0,
            "timeout_ms": 1000}


def record(*entries, enqueued=None, completed=None, ranks="[0, 1]") -> dict:
    last = entries[-1]["collective_seq_id"] if entries else 0
    return {"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": ranks}},
            "pg_status": {"0": {"last_enqueued_collective": str(enqueued if enqueued is not None else last),
                                "last_started_collective": "-1",
                                "last_completed_collective": str(completed if completed is not None else last)}},
            "entries": list(entries)}


def status(phase="running", torch_call=None, enqueued=None, in_pg=True, frames=("train.py:10 in main",),
           heartbeat=100.0) -> dict:
    progress = {"0": {"enqueued": enqueued, "started": -1, "completed": enqueued}} if enqueued is not None else None
    return {"phase": phase, "heartbeat": heartbeat, "in_process_group": in_pg, "progress": progress,
            "where": {"torch_call": torch_call, "call_site": None, "frames": list(frames)}}


def RankEvidence(rank, status=None, record=None, error=None, ended_by=None, answered=False) -> Evidence:
    """A rank's evidence as the judge gets it, from the short forms above."""
    state = None
    if status is not None:
        progress = {pg: GroupProgress(**p) for pg, p in (status.get("progress") or {}).items()} or None
        where = status["where"]
        state = RankState(rank=rank, pid=100 + rank, phase="failed" if status["phase"] == "raised" else status["phase"],
                          heartbeat=status["heartbeat"], in_process_group=status["in_process_group"],
                          progress=progress, where=Where(where["torch_call"], where["call_site"], where["frames"]),
                          recorder="_dump_fr_trace_json")
    end = None if ended_by is None else RankEnd(rank=rank, pid=100 + rank, at=1.0, exit_code=None, signal=ended_by,
                                                by_launcher=False)
    return Evidence(rank, status=state, record=record, error=None if error is None else RankError(rank=rank, **error),
                    end=end, answered=answered)


class _Verdict:
    """The culprit as this file's assertions read it (collective and analyzer as dicts)."""

    def __init__(self, culprit):
        self.ranks, self.kind, self.reason, self.evidence = culprit.ranks, culprit.kind, culprit.reason, culprit.evidence
        self.collective = to_json(culprit.collective) if culprit.collective else None
        self.analyzer = to_json(culprit.analyzer)


def name_culprits(ranks, expected, use_analyzer=True, now=None) -> _Verdict:
    """The judge; ``now``: judged as a hang declared then, with the ranks' statuses as its snapshot."""
    hang = None
    if now is not None:
        hang = Hang(declared_at=now, last_progress_at=now - 5, no_progress_s=5, hang_timeout_s=5, reason="test",
                    waiting_ranks=[], snapshot={r: ev.status for r, ev in ranks.items() if ev.status})
    return _Verdict(judge.name_culprit(ranks, expected, hang=hang, use_analyzer=use_analyzer,
                                       local_count=len(expected)))


def test_real_gloo_dumps_crash_torchs_analyzer_and_ddplab_still_names_the_rank_behind():
    ranks = {r: RankEvidence(r, status=status(), record=gloo_dump(r), answered=True) for r in (0, 1)}
    verdict = name_culprits(ranks, [0, 1])
    assert verdict.analyzer["status"] == "failed"
    assert "KeyError" in verdict.analyzer["error"]
    assert (verdict.ranks, verdict.kind) == ([1], "behind")
    assert verdict.collective == {"pg": "0", "seq": 4, "op": "all_reduce", "input_sizes": [[1024]],
                                  "dtypes": ["Float"]}


# The fixture is torch 2.13's dump. torch 2.11's analyzer rejects it ('failed', seen on the GPU machine) while
# it read that release's own dumps there ("torch's analyzer: used", docs/RESULTS.md, issue 12).
@pytest.mark.skipif(torch.__version__ < (2, 13), reason="the fixture is a torch 2.13 dump")
def test_torchs_analyzer_is_used_where_it_works():
    ranks = {r: RankEvidence(r, status=status(), record=with_named_group(gloo_dump(r)), answered=True)
             for r in (0, 1)}
    verdict = name_culprits(ranks, [0, 1])
    assert verdict.analyzer["status"] == "used"
    assert (verdict.ranks, verdict.kind) == ([1], "behind")
    assert verdict.collective["seq"] == 4 and verdict.collective["op"] == "all_reduce"


def test_same_answer_without_the_analyzer():
    ranks = {r: RankEvidence(r, status=status(), record=with_named_group(gloo_dump(r)), answered=True)
             for r in (0, 1)}
    verdict = name_culprits(ranks, [0, 1], use_analyzer=False)
    assert (verdict.ranks, verdict.kind, verdict.collective["seq"]) == ([1], "behind", 4)


def test_a_rank_that_raised_before_the_collective_is_named_with_the_collective_it_never_reached():
    ranks = {
        0: RankEvidence(0, status=status(torch_call="all_reduce", enqueued=4), answered=True,
                        record=record(entry(1), entry(2), entry(3), entry(4), completed=3)),
        1: RankEvidence(1, status=status(phase="raised", enqueued=3), record=record(entry(1), entry(2), entry(3)),
                        error={"type": "ValueError", "message": "corrupt sample", "traceback": "...", "at": 5.0}),
    }
    verdict = name_culprits(ranks, [0, 1])
    assert (verdict.ranks, verdict.kind) == ([1], "raised")
    assert verdict.collective["seq"] == 4  # the others waited for it there
    assert "raised ValueError: corrupt sample" in " ".join(verdict.evidence)


def test_one_bug_on_every_rank_is_said_in_words_not_pinned_on_the_first():
    """FSDP1 on a CPU machine: every rank raises "FSDP needs a non-CPU accelerator device" within a second."""
    error = {"type": "RuntimeError", "message": "FSDP needs a non-CPU accelerator device", "traceback": "..."}
    ranks = {r: RankEvidence(r, status=status(phase="raised"), error={**error, "at": 5.0 + r / 10}) for r in (0, 1, 2)}
    verdict = name_culprits(ranks, [0, 1, 2])
    assert (verdict.ranks, verdict.kind) == ([0, 1, 2], "raised")
    assert verdict.reason.startswith("every rank (0, 1, 2) failed the same way within 1 s, one bug and no single "
                                     "culprit: rank 0 raised RuntimeError: FSDP needs")
    assert "the first to fail" not in verdict.reason
    alone = name_culprits({0: RankEvidence(0, status=status()), 1: ranks[1]}, [0, 1])
    assert alone.ranks == [1] and alone.reason.endswith("the first to fail")


def test_a_heartbeat_of_a_rank_killed_by_a_signal_is_not_held_against_it_as_progress():
    """Its last heartbeat is a lower bound: it may have entered #4 just before SIGKILL."""
    ranks = {
        0: RankEvidence(0, status=status(torch_call="all_reduce", enqueued=4), answered=True,
                        record=record(entry(1), entry(2), entry(3), entry(4), completed=3)),
        1: RankEvidence(1, status=status(enqueued=3), ended_by="SIGKILL"),
    }
    verdict = name_culprits(ranks, [0, 1])
    assert (verdict.ranks, verdict.kind) == ([1], "died")
    assert "SIGKILL" in verdict.reason


def test_desync_names_the_minority():
    calls = {0: (1024,), 1: (1024,), 2: (2048,)}
    ranks = {r: RankEvidence(r, status=status(torch_call="all_reduce", enqueued=2), answered=True,
                             record=record(entry(1), entry(2, sizes=(size,)), completed=1, ranks="[0, 1, 2]"))
             for r, size in calls.items()}
    verdict = name_culprits(ranks, [0, 1, 2], use_analyzer=False)
    assert (verdict.ranks, verdict.kind) == ([2], "desync")
    assert verdict.collective["seq"] == 2 and verdict.collective["input_sizes"] == [[2048]]


def test_desync_between_two_ranks_names_the_one_whose_call_is_new_to_it():
    history = [entry(s) for s in (1, 2, 3)]
    ranks = {
        0: RankEvidence(0, status=status(torch_call="all_reduce"), answered=True,
                        record=record(*history, entry(4), completed=3)),
        1: RankEvidence(1, status=status(torch_call="all_reduce"), answered=True,
                        record=record(*history, entry(4, sizes=((2048,),)), completed=3)),
    }
    verdict = name_culprits(ranks, [0, 1])
    assert (verdict.ranks, verdict.kind) == ([1], "desync")
    assert verdict.collective["input_sizes"] == [[2048]]


def test_desync_between_two_ranks_without_history_names_both():
    ranks = {
        0: RankEvidence(0, status=status(torch_call="all_reduce"), answered=True, record=record(entry(1))),
        1: RankEvidence(1, status=status(torch_call="all_reduce"), answered=True,
                        record=record(entry(1, sizes=((2048,),)))),
    }
    verdict = name_culprits(ranks, [0, 1], use_analyzer=False)
    assert (verdict.ranks, verdict.kind) == ([0, 1], "desync")


def test_one_sided_record_names_the_rank_whose_last_call_is_new():
    """gloo aborts the rank that receives an unexpected size: only the sender's record survives."""
    ranks = {
        0: RankEvidence(0, status=status(enqueued=3), ended_by="SIGABRT"),
        1: RankEvidence(1, status=status(phase="raised", enqueued=4),
                        record=record(entry(1), entry(2), entry(3), entry(4, sizes=((2048,),)), completed=3),
                        error={"type": "RuntimeError", "message": "Connection reset by peer", "traceback": "",
                               "at": 2.0}),
    }
    verdict = name_culprits(ranks, [0, 1])
    assert (verdict.ranks, verdict.kind) == ([1], "desync")
    assert "inferred from one side" in verdict.reason


def test_a_rank_that_died_before_the_others_first_broadcast_is_the_culprit_not_the_novel_call():
    """Rank 1 dies without a record (os._exit, or SIGKILL as the OOM killer sends it) after 3 all_reduces; the
    others then call their first broadcast, which is new to them and waits for rank 1 for ever. The order of
    deaths outweighs the novel call (it was wrong 12 of 12 times when the novel call came first)."""
    calls = [entry(1), entry(2), entry(3), entry(4, op="broadcast")]
    for ended_by in ("SIGKILL", None):
        ranks = {0: RankEvidence(0, status=status(torch_call="broadcast", enqueued=4), answered=True,
                                 record=record(*calls, completed=3)),
                 2: RankEvidence(2, status=status(torch_call="broadcast", enqueued=4), answered=True,
                                 record=record(*calls, completed=3, ranks="[0, 1, 2]")),
                 1: RankEvidence(1, status=status(enqueued=3), ended_by=ended_by)}
        if ended_by is None:  # os._exit(3): an exit status, no signal
            ranks[1] = Evidence(1, status=ranks[1].status, end=RankEnd(rank=1, pid=101, at=1.0, exit_code=3,
                                                                        signal=None, by_launcher=False))
        verdict = name_culprits(ranks, [0, 1, 2])
        assert (verdict.ranks, verdict.kind) == ([1], "died"), verdict.reason


FAULTHANDLER_AT_OWN_ABORT = """Fatal Python error: Aborted

Thread 0x00007f37db9e16c0 (most recent call first):
  File "/ddplab/supervision/beacon.py", line 263 in _loop

Current thread 0x00007f37dd68fb80 (most recent call first):
  File "/job/train.py", line 17 in <module>
"""
FAULTHANDLER_AT_LIBRARY_ABORT = """Fatal Python error: Aborted

Thread 0x00007fec6029bb80 (most recent call first):
  File "/site-packages/torch/autograd/graph.py", line 979 in _engine_run_backward
  File "/job/train.py", line 13 in <module>
"""


def test_a_sigabrt_is_placed_by_the_stacks_faulthandler_wrote_at_it(tmp_path):
    """A rank waiting in backward() (a collective pending in its recorder) that aborts in its own code (os.abort, a
    C assert, a double free) is the culprit; one a library thread aborted (gloo's transport, NCCL's watchdog) is
    not. Both looked the same by the status alone, and the rank the launcher then stopped was named."""
    from ddplab.supervision.evidence import abort_site

    own, library = tmp_path / "own.txt", tmp_path / "library.txt"
    own.write_text(FAULTHANDLER_AT_OWN_ABORT)
    library.write_text(FAULTHANDLER_AT_LIBRARY_ABORT)
    assert (abort_site(own), abort_site(library), abort_site(tmp_path / "none.txt")) == ("own code", "library", None)
    waiting = {"progress": {"0": {"enqueued": 12, "started": -1, "completed": 11}}, "phase": "running",
               "heartbeat": 100.0, "in_process_group": True, "where": {"torch_call": None, "call_site": None,
                                                                        "frames": ["torch/autograd/graph.py:979"]}}
    for site, named in (("own code", ([1], "died")), ("library", None)):
        ranks = {0: Evidence(0, status=RankEvidence(0, status=status()).status,
                             end=RankEnd(rank=0, pid=100, at=2.0, exit_code=None, signal="SIGTERM", by_launcher=True)),
                 1: Evidence(1, status=RankEvidence(1, status=waiting).status, abort=site,
                             end=RankEnd(rank=1, pid=101, at=1.0, exit_code=None, signal="SIGABRT",
                                         by_launcher=False))}
        verdict = name_culprits(ranks, [0, 1])
        if named:
            assert (verdict.ranks, verdict.kind) == named, verdict.reason
        else:
            assert 1 not in verdict.ranks or verdict.kind != "died", verdict.reason


def test_ranks_that_all_name_one_rank_in_the_same_error_point_at_it():
    """DDP checks every rank's parameters against rank 0's: where rank 0's model is the odd one, every other rank
    raises "[N]: params[0] in this process ... appears not to match ... in process 0", and the first to raise was
    named. With two ranks, nothing tells which of the two is off."""
    def mismatch(rank):
        return {"type": "RuntimeError", "at": 1.0 + rank / 100, "traceback": "",
                "message": f"[{rank}]: params[0] in this process with sizes [40, 32] appears not to match sizes of "
                           "the same param in process 0."}

    ranks = {0: RankEvidence(0, status=status(torch_call="all_reduce", enqueued=2)),
             **{r: RankEvidence(r, status=status(phase="raised", enqueued=2), error=mismatch(r)) for r in (1, 2, 3)}}
    verdict = name_culprits(ranks, [0, 1, 2, 3])
    assert (verdict.ranks, verdict.kind) == ([0], "desync"), verdict.reason
    assert "rank 0 is the odd one out" in verdict.reason
    two = {0: ranks[0], 1: ranks[1]}
    verdict = name_culprits(two, [0, 1])
    assert (verdict.ranks, verdict.kind) == ([0, 1], "desync") and "nothing tells which" in verdict.reason
    # rank 1 of three is the odd one: it alone raised, rank 2 agrees with rank 0
    three = {0: ranks[0], 1: ranks[1], 2: RankEvidence(2, status=status(torch_call="all_reduce", enqueued=2))}
    verdict = name_culprits(three, [0, 1, 2])
    assert (verdict.ranks, verdict.kind) == ([1], "raised"), verdict.reason


def test_one_sided_record_with_a_familiar_last_call_blames_nobody_for_desync():
    """Bucketed gradients repeat their sizes: a familiar call is no evidence, the dead rank is."""
    sizes = [((4096,),), ((1024,),)] * 3
    calls = [entry(i + 1, sizes=s) for i, s in enumerate(sizes)]
    ranks = {
        0: RankEvidence(0, status=status(torch_call="all_reduce", enqueued=6), answered=True,
                        record=record(*calls, completed=5)),
        1: RankEvidence(1, status=status(enqueued=5), ended_by="SIGKILL"),
    }
    verdict = name_culprits(ranks, [0, 1])
    assert (verdict.ranks, verdict.kind) == ([1], "died")


def test_rank_that_never_reached_init_while_others_wait_in_it():
    ranks = {0: RankEvidence(0, status=status(torch_call="init_process_group", in_pg=False), answered=True),
             1: RankEvidence(1, status=status(in_pg=False, frames=("late.py:25 in main",)), answered=True)}
    verdict = name_culprits(ranks, [0, 1])
    assert (verdict.ranks, verdict.kind) == ([1], "never-reached-init")
    assert verdict.collective["op"] == "init_process_group"
    assert "late.py:25" in " ".join(verdict.evidence)


def test_rank_that_never_wrote_a_status_never_started():
    ranks = {0: RankEvidence(0, status=status(torch_call="init_process_group", in_pg=False))}
    verdict = name_culprits(ranks, [0, 1])
    assert (verdict.ranks, verdict.kind) == ([1], "never-started")


def test_frozen_heartbeat_names_the_paused_rank():
    ranks = {0: RankEvidence(0, status=status(torch_call="all_reduce", enqueued=4, heartbeat=99.0), answered=True),
             1: RankEvidence(1, status=status(torch_call="all_reduce", enqueued=4, heartbeat=80.0))}
    verdict = name_culprits(ranks, [0, 1], now=100.0)
    assert (verdict.ranks, verdict.kind) == ([1], "frozen")


def test_a_frozen_heartbeat_outranks_torchs_analyzer_and_keeps_the_collective_it_missed():
    """Seen on one H100 with NCCL 2.30.7: a rank holding the GIL in C code was named "behind" by torch's analyzer
    (it did not join all_reduce #11), which says that it did not join but not why; its heartbeat says why. NCCL's
    recorder answers the dump request from C++, so the frozen rank's record is where it stopped."""
    ranks = {r: RankEvidence(r, status=status(heartbeat=99.0 if r == 0 else 80.0),
                             record=with_named_group(gloo_dump(r)), answered=True) for r in (0, 1)}
    verdict = name_culprits(ranks, [0, 1], now=100.0)
    assert (verdict.ranks, verdict.kind) == ([1], "frozen")
    assert verdict.analyzer["status"] == "not run"
    assert verdict.collective["seq"] == 4 and verdict.collective["op"] == "all_reduce"


def test_all_ranks_in_the_same_collective_blames_nobody():
    ranks = {r: RankEvidence(r, status=status(torch_call="all_reduce", enqueued=4), answered=True,
                             record=record(entry(1), entry(2), entry(3), entry(4), completed=3))
             for r in (0, 1)}
    verdict = name_culprits(ranks, [0, 1], now=100.0)
    assert (verdict.ranks, verdict.kind) == ([], "stuck-together")
    assert "no rank stands out" in verdict.reason


def test_a_rank_the_library_aborted_while_waiting_is_said_in_words_and_not_blamed():
    """Seen on one H200: gloo's send of a device tensor failed (`writev ... Bad address`) and aborted the rank
    inside the collective; nobody's code is at fault, and the reason says where the abort came from."""
    ranks = {r: RankEvidence(r, status=status(phase="in-collective", torch_call="all_reduce", enqueued=4),
                             answered=True, record=record(entry(1), entry(2), entry(3), entry(4), completed=3))
             for r in (0, 1)}
    ranks[1].end = RankEnd(1, 101, at=100.0, exit_code=None, signal="SIGABRT", by_launcher=False)
    ranks[0].end = RankEnd(0, 100, at=100.2, exit_code=None, signal="SIGTERM", by_launcher=True)
    verdict = name_culprits(ranks, [0, 1], now=100.0)
    assert (verdict.ranks, verdict.kind) == ([], "stuck-together")
    assert "rank(s) 1 aborted (SIGABRT) inside the collective library while waiting" in verdict.reason
    assert "aborted" not in name_culprits({r: RankEvidence(r, status=status(torch_call="all_reduce", enqueued=4),
                                                           answered=True) for r in (0, 1)}, [0, 1], now=100.0).reason


def test_subgroup_progress_is_compared_only_among_its_members():
    """Rank 2 is not in group 1: its missing numbers there are no evidence against it."""
    def st(enq0, enq1=None):
        progress = {"0": {"enqueued": enq0, "started": -1, "completed": enq0}}
        if enq1 is not None:
            progress["1"] = {"enqueued": enq1, "started": -1, "completed": enq1}
        return {**status(), "progress": progress}

    ranks = {0: RankEvidence(0, status=st(5, 2), answered=True), 1: RankEvidence(1, status=st(5, 2), answered=True),
             2: RankEvidence(2, status=st(4), answered=True)}
    verdict = name_culprits(ranks, [0, 1, 2], use_analyzer=False)
    assert (verdict.ranks, verdict.kind, verdict.collective["seq"]) == ([2], "behind", 5)


def test_records_load_from_json_and_pickle(tmp_path):
    dump = gloo_dump(0)
    (tmp_path / "a.json").write_text(json.dumps(dump))
    as_pickle = {**dump, "pg_status": {"0": {"last_enqueued_collective": 4, "last_started_collective": -1,
                                             "last_completed_collective": 3}}}
    (tmp_path / "torch_rank_0").write_bytes(pickle.dumps(as_pickle))
    (tmp_path / "garbage").write_bytes(b"\x00not a dump")
    for name in ("a.json", "torch_rank_0"):
        loaded = load_record(tmp_path / name)
        assert Evidence(0, record=loaded).progress == {"0": 4}
        assert flight.collectives_by_seq(loaded, "0")[4]["input_sizes"] == [[1024]]
    assert load_record(tmp_path / "garbage") is None
    assert load_record(tmp_path / "missing") is None


@pytest.mark.parametrize("name, op", [("gloo:all_reduce", "all_reduce"), ("nccl:broadcast", "broadcast"),
                                      ("barrier", "barrier")])
def test_op_name_drops_the_backend(name, op):
    assert flight.op_name({"profiling_name": name}) == op


def test_the_culprit_is_named_at_the_first_collective_it_missed_not_at_the_leaders_last():
    """On a GPU the waiting rank has enqueued several collectives past the missing one."""
    ranks = {
        0: RankEvidence(0, status=status(torch_call="destroy_process_group", enqueued=6), answered=True,
                        record=record(*[entry(s) for s in range(1, 7)], completed=3)),
        1: RankEvidence(1, status=status(enqueued=3), answered=True, record=record(entry(1), entry(2), entry(3))),
    }
    verdict = name_culprits(ranks, [0, 1], use_analyzer=False)
    assert (verdict.ranks, verdict.kind, verdict.collective["seq"]) == ([1], "behind", 4)


def test_a_rank_without_a_process_group_while_the_others_wait_in_their_first_collective():
    """NCCL builds its communicator at the first collective: that is where the others wait."""
    ranks = {0: RankEvidence(0, status=status(torch_call="all_reduce", in_pg=True), answered=True),
             1: RankEvidence(1, status=status(in_pg=False, frames=("late.py:25 in main",)), answered=True)}
    verdict = name_culprits(ranks, [0, 1], now=100.0)
    assert (verdict.ranks, verdict.kind) == ([1], "never-reached-init")
    assert "waited in all_reduce" in verdict.reason


def test_a_sigabrt_the_status_cannot_place_is_named_with_the_caveat_and_the_records_missing():
    """Seen once in CI (the fault table's size mismatch, 3 ranks): gloo's receiver (rank 0) aborted before any
    heartbeat placed it in the collective, and the teardown ended the sender (rank 1) before it wrote its flight
    record. The order of deaths names rank 0; the reason says a SIGABRT may be the library's, and whose record is
    missing."""
    ranks = {
        0: RankEvidence(0, status=status(frames=()), ended_by="SIGABRT"),
        1: RankEvidence(1, status=status(frames=())),
        2: RankEvidence(2, status=status(phase="raised", enqueued=6), record=record(entry(1), completed=1),
                        error={"type": "RuntimeError", "message": "Connection closed by peer", "traceback": "",
                               "at": 2.0}),
    }
    ranks[1].end = RankEnd(1, 101, at=1.2, exit_code=None, signal="SIGTERM", by_launcher=True)
    verdict = name_culprits(ranks, [0, 1, 2], use_analyzer=False)
    assert (verdict.ranks, verdict.kind) == ([0], "died")
    assert verdict.reason.endswith("; a SIGABRT is also how the collective library aborts a rank waiting in it, and "
                                   "its status did not show where it was; rank(s) 1 left no flight record to compare")
    segv = {**ranks, 0: RankEvidence(0, status=status(frames=()), ended_by="SIGSEGV")}
    assert "SIGABRT is also" not in name_culprits(segv, [0, 1, 2], use_analyzer=False).reason
