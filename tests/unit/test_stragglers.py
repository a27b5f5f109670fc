"""The straggler rule (supervision/stragglers.py) over what ranks publish (supervision/arrivals.py), and the
launcher's watch that applies it (supervision/straggler_watch.py): on the arrivals of two real runs (fixtures), and
on made-up arrivals for the cases a real run on CPU does not give on demand (DDP's buckets waited for together, a
one-off wait, a rank paused now and then, device times)."""

import json
import random
import shutil
from pathlib import Path

import pytest

from ddplab.records.codec import from_json, to_json
from ddplab.records.figures import LineChart, Table
from ddplab.records.stragglers import (DEVICE, ENQUEUE, NO_TIMES, OFF, WATCHED, GroupArrivals, RankArrivals,
                                       StragglerReport)
from ddplab.basics.rundir import RunDir
from ddplab.supervision import arrivals, stragglers
from ddplab.supervision.straggler_watch import StragglerWatch

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SLOW = FIXTURES / "stragglers" / "slow-compute-1.5x-rank1"  # rank 1 slowed from collective #100 on
HEALTHY = FIXTURES / "stragglers" / "healthy-3-ranks"


def _published(folder: Path) -> dict[int, RankArrivals]:
    return {int(f.parent.name): from_json(RankArrivals, json.loads(f.read_text()))
            for f in sorted(folder.glob("ranks/*/arrivals.json"))}


def _made_up(times: dict[int, list[float]], device: dict[int, list[float]] | None = None) -> dict[int, RankArrivals]:
    """Arrivals (seconds) of collectives #1, #2, ... on each rank, as a rank would publish them."""
    out = {}
    for rank, at in times.items():
        group = GroupArrivals(list(range(1, len(at) + 1)), [round(t * 1e6) for t in at],
                              [d * 1e6 for d in device[rank]] if device else None)
        out[rank] = RankArrivals(rank, "vm", max(at), 0, {"0": group}, "_dump_fr_trace", 5.0, 0.02, len(times))
    return out


def _steps(n_ranks: int, steps: int, step_s: float = 0.02, jitter_s: float = 0.002, seed: int = 0):
    rng = random.Random(seed)
    return {r: [100 + i * step_s + rng.uniform(0, jitter_s) for i in range(steps)] for r in range(n_ranks)}


# ------------------------------------------------------------------------------------------------ real runs

def test_a_rank_slowed_by_half_its_step_is_named_with_its_evidence():
    collectives = stragglers.collectives_from(_published(SLOW))
    assert len(collectives) == 600 and {c.basis for c in collectives} == {ENQUEUE}
    [change] = stragglers.Rule().judge(collectives)
    w = change.window
    assert (change.rank, change.named, change.group) == (1, True, "0")
    assert w.last_share > 0.85 and w.wait_share > 0.95 and 0.2 < w.cost_fraction < 0.4
    assert change.rows and all(r.late_ms[1] > 10 and r.late_ms[0] == 0 for r in change.rows)
    assert "rank 1 arrived last at 523 of them (87%; by chance 50%)" in change.evidence()[1]


def test_a_healthy_job_of_three_ranks_names_nobody():
    collectives = stragglers.collectives_from(_published(HEALTHY))
    assert len(collectives) == 600
    assert stragglers.Rule().judge(collectives) == []
    shares = [w.last_share for w in stragglers.window_of(collectives).values()]
    assert max(shares) < stragglers.kept_share(3)


def test_a_collective_is_compared_only_once_every_rank_of_its_group_published_it():
    published = _published(HEALTHY)
    short = published[2].groups["0"]
    published[2] = RankArrivals(**{**published[2].__dict__, "groups": {"0": GroupArrivals(
        short.seqs[:100], short.created_us[:100])}})
    assert [c.seq for c in stragglers.collectives_from(published)] == short.seqs[:100]


# ------------------------------------------------------------------------------------------------ the rule

def test_the_shares_that_name_a_rank_lie_halfway_between_chance_and_always():
    assert [round(stragglers.named_share(n), 3) for n in (2, 3, 4, 8)] == [0.75, 0.667, 0.625, 0.562]
    assert [round(stragglers.kept_share(n), 3) for n in (2, 3, 4)] == [0.625, 0.5, 0.438]


def test_ddp_buckets_waited_for_together_cost_one_wait_per_step():
    """Four buckets a step, issued 1 ms apart; rank 1 issues each 10 ms late: the others wait 10 ms a step, not 40
    (99 waits of the 100 counted: the largest is left out)."""
    times = {0: [], 1: []}
    for step in range(100):
        for bucket in range(4):
            times[0].append(step * 0.05 + bucket * 0.001)
            times[1].append(step * 0.05 + bucket * 0.001 + 0.010)
    w = stragglers.window_of(stragglers.collectives_from(_made_up(times)))[1]
    assert w.waits == 100 and w.cost_s == pytest.approx(0.99, abs=1e-3) and w.largest_wait_s == pytest.approx(0.01)
    assert w.cost_fraction == pytest.approx(0.99 / (99 * 0.05 + 0.013), rel=1e-3)


def test_a_one_off_wait_is_no_straggler():
    """A rank that started 3 s late (or saved a checkpoint), on time otherwise: its largest wait is left out."""
    times = _steps(2, 1000)
    times[0][0] += 3.0
    collectives = stragglers.collectives_from(_made_up(times))
    w = stragglers.window_of(collectives)[0]
    assert w.largest_wait_s > 2.9 and w.cost_fraction < stragglers.COST_KEPT
    assert stragglers.Rule().judge(collectives) == []


def test_a_few_milliseconds_a_step_over_a_fraction_of_a_second_name_nobody_until_they_add_up():
    """A fast loop's first window (50 collectives in 0.7 s on a busy 2-core machine) where rank 1 was 2 ms late a
    step: 14 % of the others' time, but 0.1 s in all, which scheduling alone gives. Kept up, it is a straggler."""
    times = _steps(2, 400, step_s=0.014, jitter_s=0.0)
    for j in range(400):
        times[1][j] += 0.002
    collectives = stragglers.collectives_from(_made_up(times))
    early = stragglers.window_of(collectives[:50])[1]
    assert early.cost_fraction > stragglers.COST_NAMED and early.cost_s < stragglers.MIN_COST_S
    assert stragglers.Rule().judge(collectives[:50]) == []
    assert [(c.rank, c.named) for c in stragglers.Rule().judge(collectives)] == [(1, True)]


def test_a_rank_paused_now_and_then_is_named_by_the_waiting_it_causes():
    """Paused 200 ms once a second (the lab's straggler drill): last at no more collectives than chance says, but
    the cause of nearly all the waiting, in many waits."""
    times = _steps(2, 1500)
    for i in range(0, 1500, 50):
        for j in range(i, 1500):
            times[1][j] += 0.2
            times[0][j] += 0.2 if j > i else 0.0
    collectives = stragglers.collectives_from(_made_up(times))
    w = stragglers.window_of(collectives[-1000:])[1]
    assert w.last_share < stragglers.named_share(2) and w.wait_share > 0.9
    [change] = stragglers.Rule().judge(collectives)
    assert (change.rank, change.named) == (1, True)


def test_a_named_rank_stays_named_down_to_the_lower_thresholds():
    near = stragglers.RankWindow(1, collectives=100, last=70, last_share=0.70, cost_s=0.8, wait_share=0.7,
                                 cost_fraction=0.08, waits=70, largest_wait_s=0.01, span_s=10.0)
    assert not stragglers.is_straggler(near, 2, named=False) and stragglers.is_straggler(near, 2, named=True)
    cheap = stragglers.RankWindow(1, 100, 90, 0.9, 0.4, 0.9, 0.04, 90, 0.01, 10.0)
    assert not stragglers.is_straggler(cheap, 2, named=True)  # last at most, but costing under 5 %
    few = stragglers.RankWindow(1, 10, 10, 1.0, 1.0, 1.0, 0.5, 10, 0.1, 2.0)  # too few collectives to judge
    assert not stragglers.is_straggler(few, 2, named=False) and stragglers.is_straggler(few, 2, named=True)


def test_a_rank_back_on_time_for_a_whole_window_is_released():
    times = _steps(2, 6000, step_s=0.02)
    for j in range(2000):
        times[1][j] += 0.004  # 4 ms late (about 17 % of its step) for its first 40 s, then on time
    collectives = stragglers.collectives_from(_made_up(times))
    rule = stragglers.Rule()
    assert [(c.rank, c.named) for c in rule.judge([c for c in collectives if c.seq <= 1500])] == [(1, True)]
    assert rule.judge([c for c in collectives if c.seq <= 2500]) == []  # the window still holds its late part
    assert [(c.rank, c.named) for c in rule.judge(collectives)] == [(1, False)]


def test_device_times_put_the_rank_whose_collective_took_least_time_last():
    """Issued at once on the host, but rank 2's device reached each all_reduce 8 ms after the others' (its own
    work before it): its collective took 8 ms less on the device."""
    times = {r: [100 + i * 0.05 for i in range(200)] for r in range(3)}
    device = {r: [0.010 if r == 2 else 0.018] * 200 for r in range(3)}
    collectives = stragglers.collectives_from(_made_up(times, device))
    assert {c.basis for c in collectives} == {DEVICE}
    assert {c.last_rank for c in collectives} == {2} and collectives[0].lateness(2) == pytest.approx(0.008)
    [change] = stragglers.Rule().judge(collectives)
    assert change.rank == 2 and change.basis == DEVICE


# ------------------------------------------------------------------------------------------------ the rank's side

def test_a_rank_keeps_each_group_collectives_with_their_enqueue_times(tmp_path):
    entries = json.loads((FIXTURES / "flight" / "gloo-2.13-rank0.json").read_text())["entries"]
    p2p = {**entries[0], "is_p2p": True, "collective_seq_id": 99}
    log = arrivals.ArrivalLog(RunDir.create(tmp_path / "job", "launch"), 0, 5.0, environ={"WORLD_SIZE": "2"})
    log._keep(entries + [p2p])
    record = log.record(123.0, 0.01)
    assert list(record.groups) == ["0"] and record.groups["0"].seqs == [1, 2, 3, 4]
    assert record.groups["0"].created_us[0] == 0 and record.base_ns == entries[0]["time_created_ns"]
    assert record.groups["0"].device_us is None and record.world_size == 2
    assert from_json(RankArrivals, json.loads(json.dumps(to_json(record)))) == record


def test_reads_slow_down_until_they_cost_at_most_the_budget_and_fall_on_the_same_moment_on_every_rank():
    assert arrivals.cadence(5.0, 0.007) == 5.0
    assert arrivals.cadence(5.0, 0.025) == 20.0
    assert arrivals.cadence(5.0, 0.033) == 40.0  # torch's 2000 entries on the 2-core machine
    assert arrivals.cadence(5.0, 0.080) == 40.0  # ... at a load of 5
    assert arrivals.cadence(5.0, 0.300) == 160.0  # a buffer of 20,000 entries
    assert arrivals.cadence(5.0, 10.0) == arrivals.MAX_EVERY_S
    assert arrivals.next_read(1000.2, 5.0) == 1005.0 and arrivals.next_read(1004.99, 5.0) == 1005.0
    assert arrivals.from_environment(None, 0, environ={}) is None


# ------------------------------------------------------------------------------------------------ the watch

def _run_with(tmp_path, fixture: Path) -> RunDir:
    run = RunDir.create(tmp_path / "job", "launch")
    shutil.copytree(fixture / "ranks", run.ranks_dir, dirs_exist_ok=True)
    return run


def test_the_watch_says_when_it_names_a_rank_and_writes_its_findings(tmp_path):
    run = _run_with(tmp_path, SLOW)
    said = []
    watch = StragglerWatch(run, started_at=_published(SLOW)[0].base_ns / 1e9, say=said.append)
    watch.update()
    watch.update()  # nothing new: nothing said again
    assert len(said) == 1 and said[0].startswith("ddplab: straggler: rank 1 (host ") and "last at 87% of" in said[0]
    report = watch.report()
    assert report.status == WATCHED and report.collectives == 600 and [f.rank for f in report.findings] == [1]
    assert json.loads(run.stragglers_file.read_text())["findings"][0]["rank"] == 1
    chart, table = report.figures("launch")
    assert isinstance(chart, LineChart) and [s.label for s in chart.series] == ["rank 0", "rank 1"]
    assert isinstance(table, Table) and any("arrived last at 523" in row[1] for row in table.rows)
    assert from_json(StragglerReport, json.loads(json.dumps(to_json(report)))) == report


def test_the_report_says_why_nothing_was_watched(tmp_path):
    run = RunDir.create(tmp_path / "job", "launch")
    assert StragglerWatch(run, 0.0, enabled=False, off_reason="--no-stragglers").report() == \
        StragglerReport(OFF, why="--no-stragglers")
    off = RankArrivals(0, "vm", 1.0, 0, {}, None, 5.0, 0.0, 2, "the flight recorder is off (TORCH_FR_BUFFER_SIZE=0)")
    run.rank_dir(0).mkdir(parents=True)
    run.arrivals_file(0).write_text(json.dumps(to_json(off)))
    watch = StragglerWatch(run, 0.0)
    watch.update()
    report = watch.report()
    assert (report.status, report.why) == (NO_TIMES, off.unavailable)
    assert "not watched (the flight recorder is off" in report.summary()


def test_a_finding_keeps_its_keys(tmp_path):
    """The report's straggler lists, whose elements the golden launch does not pin (tests/golden/commands.py)."""
    watch = StragglerWatch(_run_with(tmp_path, SLOW), 0.0)
    watch.update()
    report = watch.report()
    finding, series = to_json(report)["findings"][0], to_json(report)["lateness"][0]
    assert sorted(finding) == ["basis", "chance", "collectives", "cost_fraction", "evidence", "group", "host",
                               "last_share", "rank", "rows", "since", "until", "wait_share", "window_s"]
    assert sorted(finding["rows"][0]) == ["first_at", "group", "late_ms", "seq"] and sorted(series) == ["points", "rank"]


def test_the_launch_page_draws_each_ranks_lateness_and_the_findings_escaped(tmp_path):
    import dataclasses
    import html

    from ddplab.reading.catalog import report_from_json
    from ddplab.report.page import render_html

    evil = "<script>alert(1)</script>"
    watch = StragglerWatch(_run_with(tmp_path, SLOW), started_at=_published(SLOW)[0].base_ns / 1e9)
    watch.update()
    found = watch.report()
    found = dataclasses.replace(found, findings=[dataclasses.replace(f, host=evil) for f in found.findings])
    launch = report_from_json(json.loads((FIXTURES / "launch-report-skipped-collective.json").read_text()))
    report = dataclasses.replace(launch, results=dataclasses.replace(launch.results, stragglers=found))
    assert [f.id for f in report.results.figures("launch")][:4] == ["launch-ranks", "launch-culprit",
                                                                   "straggler-lateness", "stragglers"]
    page = render_html(report_from_json(json.loads(json.dumps(report.to_json()))))
    assert "id='straggler-lateness'" in page and "id='stragglers'" in page
    assert page.count("<polyline class='series'") == 2  # one line per rank
    assert evil not in page.split("<script type='application/json'")[0] and html.escape(evil) in page


def test_a_rank_whose_reads_take_too_long_stops_reading_and_says_why(tmp_path, monkeypatch):
    entries = json.loads((FIXTURES / "flight" / "gloo-2.13-rank0.json").read_text())["entries"]
    monkeypatch.setattr(arrivals.flight_recorder, "read_entries", lambda: ("_dump_fr_trace", entries))
    monkeypatch.setattr(arrivals, "MAX_READ_S", -1.0)  # every read is too long
    run = RunDir.create(tmp_path / "job", "launch")
    run.rank_dir(0).mkdir(parents=True)
    log = arrivals.ArrivalLog(run, 0, 5.0, environ={})
    log.tick(log._next, in_process_group=True)
    assert log.unavailable is None and from_json(RankArrivals, json.loads(run.arrivals_file(0).read_text())).groups
    log.tick(log._next, in_process_group=True)
    published = from_json(RankArrivals, json.loads(run.arrivals_file(0).read_text()))
    assert "twice in a row" in published.unavailable and not published.groups
    assert log._next == float("inf")
    log.last_read()  # no more reads, not even the last one
    assert json.loads(run.arrivals_file(0).read_text()) == to_json(published)


def test_across_machines_the_watch_reads_every_rank_from_the_jobs_store_and_writes_its_findings_there(tmp_path):
    from torch.distributed import HashStore

    from ddplab.cluster.status_store import JobStoreReader, StatusPublisher, status_prefix
    from ddplab.records.supervision import RankState

    store = HashStore()
    for rank in (0, 1):
        publisher = StatusPublisher(store, rank, job="job1")
        publisher.publish(RankState(rank=rank, pid=100 + rank, phase="running", world_size=2))
        publisher.publish_arrivals((SLOW / "ranks" / str(rank) / "arrivals.json").read_text())
    run = RunDir.create(tmp_path / "job", "launch")  # this machine's files hold nothing: the store has it all
    run.listen_file.write_text(json.dumps({"across_machines": True, "address": "10.0.0.1", "port": 29400}))
    said = []
    watch = StragglerWatch(run, 0.0, say=said.append, job="job1",
                           open_reader=lambda address, port, job: JobStoreReader(store, job=job))
    watch.update()
    assert len(said) == 1 and "rank 1" in said[0]
    assert [f["rank"] for f in json.loads(store.get(f"{status_prefix('job1')}/stragglers"))["findings"]] == [1]
