"""Reports across machines, without processes: what the ranks gathered becomes every machine's report (every
rank and its machine, the groups inside and between machines, the machine pairs), judged by the stated rule,
written once per report and never per rank, shown in the terminal and in the HTML report."""

from dataclasses import replace
from types import SimpleNamespace

import pytest
from rich.console import Console

from ddplab.measurements import aggregate, checks, storm
from ddplab import measurements
from ddplab.report.page import render_html
from ddplab.cluster.topology import comparison_groups, pair_groups
from ddplab.commands import machines_view
from ddplab.records.config import LaunchOptions
from ddplab.measurements.pairwise import PairwiseConfig
from ddplab.measurements.storm import StormConfig
from ddplab.measurements import pairwise
from ddplab.measurements.sweep import merge_row
from ddplab.records import Report, Verdict
from ddplab.records.codec import from_json, to_json
from ddplab.records.machines import INTER, INTRA, PAIR, WHOLE_JOB, GatheredJob, Group, GroupResult, PairResult, \
    RankPlace
from ddplab.records.pairwise import PairwiseRankResult
from ddplab.records.session import Distribution, Histogram, RankOutcome
from ddplab.records.storm import StormRankResult, StormRecord, StormSummary
from ddplab.records.sweep import Repetition, SweepRankRow, SweepRecord
from ddplab.workloads.machines import several_launchers, this_machine
from ddplab.reading.catalog import report_from_json
from tests.crafted_reports import assert_inert
from tests.unit.fake_sessions import session_record

A, B, C = "10.9.0.1", "10.9.0.2", "10.9.0.3"
TWO_BY_TWO = {0: A, 1: A, 2: B, 3: B}
PLACES = [RankPlace(r, r % 2, m, "vm") for r, m in TWO_BY_TWO.items()]


def storm_job(means: dict[int, dict[int, float]]) -> GatheredJob:
    """The 2 x 2 job's groups, with each group's members' pipelined means ({group: {rank: mean}})."""
    groups = comparison_groups(TWO_BY_TWO)
    results = [GroupResult(g, rank, mean) for g, by_rank in means.items() for rank, mean in by_rank.items()]
    return GatheredJob(PLACES, groups, results, [[i] for i in range(len(groups))])


def storm_rank(machines: GatheredJob | None = None) -> StormRankResult:
    d = Distribution.of([100.0, 120.0])
    return StormRankResult(mean_us=100.0, seed_method_us=90.0, per_op_us=d, per_op_histogram=Histogram([1], [0, 2]),
                           device_us=None, cpu_user_s=0.1, cpu_system_s=0.1, ctx_switches=1, storm_wall_s=1.0,
                           correct=True, machines=machines)


def rank_rows(rank: int, times_us: dict[int, float], wrong: int = 0) -> list[SweepRankRow]:
    """One member's all_reduce rows: size -> time (one repetition each)."""
    return [SweepRankRow(op="all_reduce", size_bytes=size, count=size // 4, in_place=True,
                         repeats=[Repetition(time_us=t, window=(0.0, 1.0), sampler_wait_s=0.0)], num_wrong=wrong)
            for size, t in times_us.items()]


def ranks_gathered(job: GatheredJob):
    """A rank result carrying what the ranks gathered (any workload's result has the field)."""
    return SimpleNamespace(machines=job)


SUMMARY = StormSummary(method="m", mean_us=100.0, mean_us_max_rank=100.0, seed_method_us=90.0,
                       per_op_us=Distribution.of([1.0]), cpu_system_pct_of_wall=1.0, cpu_user_pct_of_wall=1.0)


def merge(same, n):
    return merge_row(same, n, "float")


def pairs_job(time_at_largest: dict[tuple[str, str], float], wrong: dict[tuple[str, str], int] = {}) -> GatheredJob:
    """Three machines, one rank each: every pair timed at 8 B (10 us) and 1 MiB (the given time)."""
    hosts = {0: A, 1: B, 2: C}
    rounds = pair_groups(hosts)
    groups = [g for round_ in rounds for g in round_]
    results = []
    for index, group in enumerate(groups):
        key = tuple(group.machines)
        for rank in group.ranks:
            results.append(GroupResult(index, rank, rank_rows(rank, {8: 10.0, 1 << 20: time_at_largest[key]},
                                                              wrong.get(key, 0))))
    places = [RankPlace(r, 0, m, "vm") for r, m in hosts.items()]
    return GatheredJob(places, groups, results, [[i] for i in range(len(groups))])


# ---------------------------------------------------------------------------------------------- the groups

def test_a_two_by_two_job_is_compared_as_the_whole_job_each_machine_and_one_rank_per_machine():
    assert comparison_groups(TWO_BY_TWO) == [Group(WHOLE_JOB, [A, B], [0, 1, 2, 3]), Group(INTRA, [A], [0, 1]),
                                             Group(INTRA, [B], [2, 3]), Group(INTER, [A, B], [0, 2])]


def test_one_machine_has_nothing_to_compare_and_one_rank_per_machine_is_the_whole_job():
    assert comparison_groups({0: A, 1: A}) == []
    assert comparison_groups({0: A, 1: B, 2: C}) == [Group(WHOLE_JOB, [A, B, C], [0, 1, 2])]


def test_pairs_are_every_machine_pair_once_by_their_lowest_ranks():
    rounds = pair_groups({0: A, 1: A, 2: B, 3: B, 4: C, 5: C})
    pairs = sorted(tuple(g.machines) for r in rounds for g in r)
    assert pairs == [(A, B), (A, C), (B, C)] and len(rounds) == 3
    assert all(g.scope == PAIR and g.ranks == [2 * [A, B, C].index(g.machines[0]), 2 * [A, B, C].index(g.machines[1])]
               for r in rounds for g in r)


def test_a_rank_knows_its_machine_by_the_launcher_s_address_and_whether_the_job_spans_launchers():
    assert this_machine({"DDPLAB_NODE_ADDR": A}) == A
    assert this_machine({}) not in ("", A)  # the hostname, where no address was given
    assert several_launchers(4, {"LOCAL_WORLD_SIZE": "2"})
    assert not several_launchers(2, {"LOCAL_WORLD_SIZE": "2"}) and not several_launchers(2, {})


# ---------------------------------------------------------------------------------------------- storm

def test_the_storm_s_groups_are_averaged_over_their_members_and_every_rank_is_listed():
    job = storm_job({0: {0: 400, 1: 400, 2: 420, 3: 420}, 1: {0: 50, 1: 60}, 2: {2: 52, 3: 54}, 3: {0: 300, 2: 310}})
    m = aggregate.storm_machines([storm_rank(), storm_rank(job)], 4)
    assert [(g.group.label, g.mean_us, g.mean_us_max_rank) for g in m.latency] == [
        ("whole job (2 machines)", 410, 420), (f"{INTRA} {A}", 55, 60), (f"{INTRA} {B}", 53, 54),
        ("inter-machine (2 machines)", 305, 310)]
    assert [(p.rank, p.machine) for p in m.job.ranks] == list(TWO_BY_TWO.items())
    assert m.job.machines == {A: [0, 1], B: [2, 3]}
    assert aggregate.storm_machines([storm_rank()], 4) is None  # one launcher: nothing gathered


@pytest.mark.parametrize("host_only, verdict", [(False, Verdict.WARN), (True, Verdict.INFO)])
def test_a_machine_twice_as_slow_inside_as_the_others_is_a_finding(host_only, verdict):
    job = storm_job({0: {0: 400, 1: 400, 2: 400, 3: 400}, 1: {0: 50, 1: 50}, 2: {2: 101, 3: 101},
                     3: {0: 300, 2: 300}})
    rows = storm.storm_checks(aggregate.storm_machines([storm_rank(job)], 4), host_only)
    assert rows[0].check == "latency inside and between machines" and rows[0].verdict == Verdict.INFO
    assert f"{INTRA} {B} 101.0 us" in rows[0].value
    alike = rows[1]
    assert alike.verdict == verdict and alike.value.startswith(f"slow: {B};")
    assert ("informational on the host CPU" in alike.threshold) is host_only


def test_exactly_twice_the_others_is_not_yet_slow():
    assert checks.slow_ones({"a": 50, "b": 100}, higher_is_worse=True) == []
    assert checks.slow_ones({"a": 50, "b": 100.1}, higher_is_worse=True) == ["b"]
    assert checks.slow_ones({"a": 10, "b": 4.9}, higher_is_worse=False) == ["b"]
    assert checks.slow_ones({"a": 10}, higher_is_worse=False) == []


def test_a_storm_record_across_machines_reads_back_and_a_single_machine_one_writes_no_new_key():
    job = storm_job({0: {0: 400, 1: 400, 2: 420, 3: 420}, 1: {0: 50, 1: 60}, 2: {2: 52, 3: 54}, 3: {0: 300, 2: 310}})
    session = replace(session_record(), ranks=[RankOutcome(rank=0, local_rank=0, pid=1, device="cpu",
                                                           peak_mem_bytes=None, result=storm_rank(job))])
    record = StormRecord(session=session, correct=True, threshold_us=1000.0, threshold_reason="t",
                         within_threshold=True, summary=SUMMARY,
                         machines=aggregate.storm_machines([storm_rank(job)], 4))
    data = to_json(record)
    assert "machines" not in data["ranks"][0]  # what the ranks gathered is written once, not per rank
    assert [g["scope"] for g in data["machines"]["latency"]] == [WHOLE_JOB, INTRA, INTRA, INTER]
    assert data["machines"]["ranks"][2] == {"rank": 2, "local_rank": 0, "machine": B, "hostname": "vm"}
    back = from_json(StormRecord, data)
    assert back.machines == record.machines
    assert "machines" not in to_json(replace(record, machines=None))


# ---------------------------------------------------------------------------------------------- sweep

def sweep_job(wrong_on_b: int = 0) -> GatheredJob:
    """The 2 x 2 job: 1 MiB in 100 us on the whole job, 20 us inside each machine, 50 us between them."""
    time_of = {0: 100.0, 1: 20.0, 2: 20.0, 3: 50.0}
    groups = comparison_groups(TWO_BY_TWO)
    results = [GroupResult(i, r, rank_rows(r, {1 << 20: time_of[i]}, wrong_on_b if i == 2 else 0))
               for i, g in enumerate(groups) for r in g.ranks]
    return GatheredJob(PLACES, groups, results, [[i] for i in range(len(groups))])


def test_each_group_s_busbw_uses_its_own_size():
    m = aggregate.sweep_machines([ranks_gathered(sweep_job())], merge)
    by_label = {g.group.label: g.row for g in m.rows}
    algbw = (1 << 20) / 1e9 / 100e-6
    assert by_label["whole job (2 machines)"].busbw_gbps == pytest.approx(algbw * 2 * 3 / 4)  # 2(n-1)/n, n = 4
    assert by_label[f"{INTRA} {A}"].busbw_gbps == pytest.approx(5 * algbw * 1.0)  # n = 2: factor 1
    assert by_label["inter-machine (2 machines)"].busbw_gbps == pytest.approx(2 * algbw)
    rows = aggregate.sweep_checks(m, host_only=False)
    assert [c.verdict for c in rows] == [Verdict.PASS, Verdict.INFO, Verdict.PASS]
    assert rows[1].check == "bus bandwidth inside and between machines"


def test_wrong_data_on_one_machine_fails_and_names_the_group():
    machines = aggregate.sweep_machines([ranks_gathered(sweep_job(wrong_on_b=3))], merge)
    rows = aggregate.sweep_checks(machines, host_only=True)
    assert rows[0].verdict == Verdict.FAIL and rows[0].value == f"#wrong 6, errors 0 ({INTRA} {B})"


def test_a_sweep_record_across_machines_reads_back_with_the_group_beside_each_row():
    record = SweepRecord(session=session_record(), mode="pipelined", dtype="float", rows=[], num_wrong_total=0,
                         errors=[], avg_busbw_gbps=None, min_busbw_gbps=None, ceiling=None,
                         machines=aggregate.sweep_machines([ranks_gathered(sweep_job())], merge))
    data = to_json(record)
    first = data["machines"]["rows"][0]
    assert (first["scope"], first["ranks"], first["op"], first["size_bytes"]) == (WHOLE_JOB, [0, 1, 2, 3],
                                                                                  "all_reduce", 1 << 20)
    assert from_json(SweepRecord, data).machines == record.machines


# ---------------------------------------------------------------------------------------------- pairs

def test_the_machine_in_every_slow_pair_is_the_suspect():
    job = pairs_job({(B, C): 1000.0, (A, C): 1000.0, (A, B): 100.0})
    rows, pairs = aggregate.pair_results(job, merge)
    assert {p.label for p in pairs} == {f"{A} <-> {B}", f"{A} <-> {C}", f"{B} <-> {C}"}
    assert sorted(p.round for p in pairs) == [0, 1, 2] and len(rows) == 6
    assert {(p.latency_size_bytes, p.busbw_size_bytes) for p in pairs} == {(8, 1 << 20)}
    finding = aggregate.judge_pairs(pairs)
    assert sorted(finding.slow) == [f"{A} <-> {C}", f"{B} <-> {C}"] and finding.suspects == [C]
    assert finding.slowest in finding.slow and finding.broken == [] and finding.flagged


def test_alike_pairs_flag_nothing_and_name_the_slowest_anyway():
    finding = aggregate.judge_pairs(aggregate.pair_results(pairs_job({(B, C): 110.0, (A, C): 100.0,
                                                                      (A, B): 105.0}), merge)[1])
    assert (finding.slow, finding.broken, finding.suspects) == ([], [], [])
    assert finding.slowest == f"{B} <-> {C}"


def test_wrong_data_breaks_a_pair_and_fails_the_check():
    job = pairs_job({(B, C): 100.0, (A, C): 100.0, (A, B): 100.0}, wrong={(A, B): 2})  # each rank, each size
    record = pairwise.record_of(session_record(world_size=3), [PairwiseRankResult([], machines=job)])
    assert record.finding.broken == [f"{A} <-> {B}"] and record.finding.suspects == []
    check = pairwise.pairs_check(record)
    assert check.verdict == Verdict.FAIL and f"broken: {A} <-> {B} (8 wrong element(s))" in check.value
    assert Verdict.worst(c.verdict for c in pairwise.checks(record)) == Verdict.FAIL


@pytest.mark.parametrize("placement, verdict", [({"host_only": True}, Verdict.INFO), (None, Verdict.WARN)])
def test_a_slow_pair_warns_on_a_device_and_informs_on_the_host(placement, verdict):
    job = pairs_job({(B, C): 1000.0, (A, C): 100.0, (A, B): 100.0})
    session = replace(session_record(world_size=3), placement=placement)
    check = pairwise.pairs_check(pairwise.record_of(session, [PairwiseRankResult([], machines=job)]))
    assert check.verdict == verdict and f"slow: {B} <-> {C}" in check.value
    assert check.threshold.startswith(aggregate.PAIR_RULE)


def test_one_pair_has_nothing_to_compare_with_and_one_machine_has_no_pair():
    one = [PairResult(A, B, 0, 1, 0, 10.0, 8, 1.0, 1 << 20)]
    assert aggregate.judge_pairs(one).note == "one pair: nothing to compare it with"
    record = pairwise.record_of(session_record(), [PairwiseRankResult([], machines=GatheredJob(PLACES[:2]))])
    assert record.pairs == [] and pairwise.pairs_check(record).verdict == Verdict.SKIP


# ---------------------------------------------------------------------------------------------- shown

def test_the_terminal_shows_every_rank_the_groups_and_the_pairs():
    console = Console(record=True, width=200)
    m = aggregate.sweep_machines([ranks_gathered(sweep_job())], merge)
    console.print(*machines_view.sweep_tables(m))
    pairs = aggregate.pair_results(pairs_job({(B, C): 1000.0, (A, C): 1000.0, (A, B): 100.0}), merge)[1]
    console.print(machines_view.pairs_table(pairs, aggregate.judge_pairs(pairs)))
    text = console.export_text()
    assert "Every rank of the job: 4 on 2 machine(s)" in text
    assert f"{INTRA} {A}" in text and "1048576" in text and f"{A} <-> {B}" in text
    assert text.count("slow") >= 2
    # two launchers on one machine: every rank, and no groups to show
    one_machine = GatheredJob([RankPlace(0, 0, A, "vm"), RankPlace(1, 0, A, "vm")])
    tables = machines_view.sweep_tables(aggregate.sweep_machines([ranks_gathered(one_machine)], merge))
    assert [t.title for t in tables] == ["Every rank of the job: 2 on 1 machine(s)"]


def _report(command, config, record) -> Report:
    return measurements.report(measurements.get(command), config, record)


def test_the_html_report_draws_the_machines_the_groups_and_the_pairs_escaping_a_hostile_machine_name():
    evil = "<script>alert(1)</script>"
    job = storm_job({0: {0: 400, 1: 400, 2: 420, 3: 420}, 1: {0: 50, 1: 60}, 2: {2: 52, 3: 54}, 3: {0: 300, 2: 310}})
    job = replace(job, places=[replace(p, hostname=evil) for p in job.places])
    storm_record = StormRecord(session=session_record(), correct=True, threshold_us=1000.0, threshold_reason="t",
                               within_threshold=True, summary=SUMMARY,
                               machines=aggregate.storm_machines([storm_rank(job)], 4))
    report = _report("storm", StormConfig(), storm_record)
    page = render_html(report_from_json(report.to_json()))
    assert_inert(page, report.to_json())
    assert "id='machines-storm'" in page and "id='storm-machines-storm'" in page and evil not in page
    sweep_record = SweepRecord(session=session_record(), mode="pipelined", dtype="float", rows=[],
                               num_wrong_total=0, errors=[], avg_busbw_gbps=None, min_busbw_gbps=None, ceiling=None,
                               machines=aggregate.sweep_machines([ranks_gathered(sweep_job())], merge))
    assert [f.id for f in sweep_record.machines.figures("sweep")] == ["machines-sweep", "busbw-machines-sweep"]
    pair_record = pairwise.record_of(session_record(world_size=3), [PairwiseRankResult(
        [], machines=pairs_job({(B, C): 1000.0, (A, C): 1000.0, (A, B): 100.0}))])
    pair_report = _report("pairwise", PairwiseConfig(launch=LaunchOptions(nproc=1, nnodes=3,
                                                                          rdzv_endpoint=f"{A}:29400")), pair_record)
    page = render_html(report_from_json(pair_report.to_json()))
    assert_inert(page, pair_report.to_json())
    assert "id='pairs-pairwise'" in page and "id='pairs-busbw-pairwise'" in page
    assert page.count(">slow<") == 2 and f"{A} &lt;-&gt; {C}" in page


def test_compare_lines_pairs_up_by_pair_and_size():
    job = pairs_job({(B, C): 1000.0, (A, C): 100.0, (A, B): 100.0})
    record = pairwise.record_of(session_record(world_size=3), [PairwiseRankResult([], machines=job)])
    rows = {(t.op, t.size_bytes): t.time_us for t in record.timed_rows()}
    assert rows[(f"all_reduce {B} <-> {C}", 1 << 20)] == 1000.0 and len(rows) == 6
