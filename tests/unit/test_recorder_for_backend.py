"""Why a rank in its process group has no recorded collectives, as the straggler watch reports it: torch before
2.8 built for a device (PyPI's wheels) has the vendor's recorder only, which a gloo group never writes to. The
stand-ins are torch's c10d extension and torch.distributed as the rank's beacon thread finds them loaded."""

import sys
import types

import pytest

from ddplab.platform import flight_recorder

NO_GLOO_RECORDER = "this torch has no flight recorder for the job's backend (gloo's arrived in torch 2.8)"


def _loaded(monkeypatch, dumpers: tuple[str, ...], backend: str) -> None:
    c10d = types.SimpleNamespace(**{name: lambda *args: b"" for name in dumpers})
    dist = types.SimpleNamespace(is_initialized=lambda: True, get_backend=lambda: backend)
    monkeypatch.setitem(sys.modules, "torch._C._distributed_c10d", c10d)
    monkeypatch.setitem(sys.modules, "torch.distributed", dist)


@pytest.mark.parametrize("dumpers, backend, why", [
    (("_dump_nccl_trace",), "gloo", NO_GLOO_RECORDER),  # torch 2.4 to 2.7, a CUDA build
    ((), "gloo", NO_GLOO_RECORDER),  # a build without any recorder
    (("_dump_nccl_trace",), "nccl", None),  # the vendor's recorder has the group: nothing recorded yet
    (("_dump_nccl_trace", "_dump_fr_trace", "_dump_fr_trace_json"), "gloo", None),  # 2.8 on
])
def test_no_recorder_for_the_groups_backend_is_said_so(monkeypatch, dumpers, backend, why):
    _loaded(monkeypatch, dumpers, backend)
    assert flight_recorder.why_no_entries({}) == why
