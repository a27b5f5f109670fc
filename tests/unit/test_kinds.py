"""Every report ddplab writes comes from a kind (a measurement, the lab, launch, clean, compare) through one
function, records.make_report, whose verdict is the worst of the kind's checks on one severity order."""

import pytest

from ddplab.reading import catalog, comparison
from ddplab.records import Check, Verdict, make_report
from ddplab.records.compare import CompareConfig, CompareRecord, ComparedRow
from ddplab.records.core import ChoosesAtRun, Kind


KINDS = [name for name in catalog.kinds() if catalog.kind_of(name) is not None]


def test_every_report_but_a_comparisons_and_a_checks_has_a_kind():
    assert set(catalog.kinds()) - set(KINDS) == {"compare", "check"}  # read through their records alone


def test_a_comparison_is_the_kind_that_makes_it():
    assert comparison.Config is catalog.types_for("compare")[0] and comparison.Record is catalog.types_for("compare")[1]


@pytest.mark.parametrize("name", KINDS)
def test_every_kind_has_the_measurement_shape(name):
    kind = catalog.kind_of(name)
    assert isinstance(kind, Kind) and kind.NAME == name
    assert kind.Config.__dataclass_params__.frozen and kind.SUMMARY


def test_the_kinds_that_choose_at_run_time_say_so():
    assert {n for n in KINDS if isinstance(catalog.kind_of(n), ChoosesAtRun)} == \
        {"sweep", "run", "launch"}


def test_one_severity_order():
    assert [v.severity for v in (Verdict.PASS, Verdict.SKIP, Verdict.WARN, Verdict.FAIL)] == [0, 0, 1, 2]
    assert Verdict.worst([Verdict.SKIP, Verdict.SKIP]) is Verdict.PASS  # skipped: recorded, not judged
    assert Verdict.worst([Verdict.PASS, Verdict.WARN, Verdict.SKIP]) is Verdict.WARN
    assert Verdict.worst([Verdict.WARN, Verdict.FAIL]) is Verdict.FAIL and Verdict.worst([]) is Verdict.PASS


def _compared(time_change: float, spike: bool = False) -> ComparedRow:
    return ComparedRow(op="all_reduce", size_bytes=1024, in_place=False, old_time_us=10.0,
                       new_time_us=10.0 * (1 + time_change), old_busbw_gbps=None, new_busbw_gbps=None,
                       time_change=time_change, regression=time_change > 0.05 and not spike, new_wrong=False,
                       spike=spike)


def test_a_comparison_is_judged_alone_and_again_when_read_back_with_what_it_was_asked():
    config = CompareConfig("a.txt", "b.txt", tolerance=0.05, min_size=2048)
    record = CompareRecord(rows=[_compared(0.01, spike=True)], verdict_changes=[], config=config)
    report = make_report(comparison, config, record)
    assert report.verdict is Verdict.PASS  # the spike is below --min-size: shown, not judged
    again = catalog.report_from_json(report.to_json())
    assert again.results.config == config and again.results.checks() == record.checks()
    assert "B within 5 % of A" in {c.threshold for c in again.results.checks()}


def test_what_a_comparison_lacks_is_in_its_checks_and_its_verdict():
    from ddplab.records.compare import MissingRow

    config = CompareConfig("a.txt", "b.txt")
    lost = CompareRecord(rows=[_compared(0.0)], verdict_changes=[], missing_stages=["sweep"], config=config)
    warned = CompareRecord(rows=[_compared(0.0)], verdict_changes=[],
                           missing_rows=[MissingRow("all_reduce", 8, False, loss=False)], config=config)
    rows = {c.check: c.verdict for c in lost.checks()}
    assert rows["no stage of A missing"] is Verdict.FAIL and make_report(comparison, config, lost).verdict is Verdict.FAIL
    assert make_report(comparison, config, warned).verdict is Verdict.WARN


def test_a_kinds_checks_make_the_verdict():
    class Toy:
        NAME, SUMMARY = "toy", "a toy"

        @staticmethod
        def checks(record):
            return [Check("a", Verdict.PASS, "", "", "", ""), Check("b", record, "", "", "", "")]

    assert make_report(Toy, None, Verdict.WARN).verdict is Verdict.WARN
    assert make_report(Toy, None, Verdict.SKIP).verdict is Verdict.PASS
