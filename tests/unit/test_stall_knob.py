"""The stall drill turns on the vendor's blocking wait only where the vendor's library runs: on one H200 with the
image's NCCL, two ranks sharing the GPU run gloo, and the report said TORCH_NCCL_BLOCKING_WAIT=1 for a run that NCCL
never touched (docs/results/1xh200-blocking-wait/full_stock_report.json)."""

from types import SimpleNamespace

import pytest

from ddplab.drills import stall
from ddplab.platform.vendors import VENDORS
from ddplab.records.drill import DrillOutcome


@pytest.mark.parametrize("backend, asks, said", [
    ("nccl", [None, {"TORCH_NCCL_BLOCKING_WAIT": "1"}], "TORCH_NCCL_BLOCKING_WAIT=1"),
    ("gloo", [None], "none (gloo waits are always blocking: the default run is this run, not run twice)"),
])
def test_the_blocking_wait_knob_follows_the_backend(monkeypatch, backend, asks, said):
    asked = []

    def observe(ctx, label, fault, rank_env=None):
        asked.append(rank_env)
        return SimpleNamespace(outcome=DrillOutcome(drill="stall"))

    monkeypatch.setattr(stall.runner, "observe", observe)
    ctx = SimpleNamespace(platform=SimpleNamespace(spec=VENDORS["cuda"]), placement=SimpleNamespace(backend=backend))
    outcome = stall.run(ctx)
    assert asked == asks
    assert outcome.details.blocking_wait.blocking_wait_env == said
