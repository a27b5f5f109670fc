"""The golden test's key normalisation (tests/golden/commands.py): what a run decides is not compared, what the
code decides is."""

import json
from pathlib import Path

import pytest

from tests.golden.commands import SAMPLER_PEAKS, stable

GOLDEN = json.loads((Path(__file__).resolve().parents[1] / "golden" / "keys.json").read_text())
RANK = "results.ranks[]."


def _unsampled(paths: list[str]) -> set[str]:
    """The key paths of the same run had the sampler never seen its ranks: no per-rank peaks."""
    return {p for p in paths if not any(p == RANK + k for k in SAMPLER_PEAKS)}


@pytest.mark.parametrize("command", ["ceiling", "sweep", "train", "contention"])
def test_a_run_too_short_to_be_sampled_keeps_its_keys(command):
    assert stable(_unsampled(GOLDEN[command]), command) == stable(set(GOLDEN[command]), command)


def test_keys_a_rank_result_writes_itself_stay_pinned():
    """A storm rank's own CPU times (records/storm.py) are there sampled or not: losing them is a lost key."""
    kept = stable(set(GOLDEN["storm"]), "storm")
    assert {RANK + "cpu_user_s", RANK + "cpu_system_s"} <= kept
    assert stable(_unsampled(GOLDEN["storm"]), "storm") != kept
