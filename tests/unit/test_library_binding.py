"""The library binding: the vendor fact, choosing and importing it (exit 3 with the install hint),
several ranks per device, the unique id through a c10d store, and the nccl4py adapter's calls
against a stand-in module with the 0.6.0 signatures (nccl4py itself needs a GPU to import)."""

from __future__ import annotations

import sys
import tomllib
import types
from pathlib import Path

import pytest

from ddplab.errors import EnvironmentUnsupported, ExitCode, UsageError
from ddplab.platform import VENDORS, describe
from ddplab.collectives.common import LibraryCall
from ddplab.platform import library_binding as lb
from ddplab.platform.library_calls import check_call
from ddplab.platform.nccl4py import Nccl4pyAdapter
from tests.unit import fakes

ROOT = Path(__file__).resolve().parents[2]


def _no_module(name):
    def importer(module):
        raise ModuleNotFoundError(f"No module named '{name}'", name=name)
    return importer


# --- the vendor fact -------------------------------------------------------------------------

def test_nvidia_names_nccl4py_with_its_install_hint_and_needs():
    spec = VENDORS["cuda"].library_binding
    assert (spec.name, spec.distribution, spec.tested_version, spec.module) == \
        ("nccl4py", "nccl4py", "0.6.0", "nccl.bindings.nccl")
    assert set(spec.requires) == {"cuda-bindings", "cuda-core", "cuda-pathfinder", "numpy"}
    assert "pip install 'ddplab[nccl]'" in spec.install_hint and "nccl4py~=0.6.0" in spec.install_hint
    assert spec.adapter in lb.ADAPTERS


@pytest.mark.parametrize("device_type", ["musa", "npu", "xpu", "cpu"])
def test_other_vendors_know_no_binding(device_type):
    assert VENDORS[device_type].library_binding is None


def test_the_extra_installs_the_binding_and_what_it_needs():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    spec = VENDORS["cuda"].library_binding
    names = {req.split("~")[0].split(">")[0].split("=")[0] for req in extras[spec.extra]}
    assert names == {spec.distribution, *spec.requires}


# --- choosing the binding --------------------------------------------------------------------

@pytest.mark.parametrize("probe", [fakes.musa(), fakes.ascend(), fakes.intel(), fakes.cpu_only()])
def test_a_vendor_without_binding_cannot_run_the_library_engine(probe):
    with pytest.raises(EnvironmentUnsupported) as err:
        lb.open_binding(describe(probe), environ={})
    assert err.value.exit_code == ExitCode.ENVIRONMENT == 3
    assert err.value.reference == "no-library-binding"
    assert "no library binding known" in err.value.message


def test_a_missing_binding_is_exit_3_with_the_install_hint():
    with pytest.raises(EnvironmentUnsupported) as err:
        lb.open_binding(describe(fakes.nvidia(2)), environ={}, import_module=_no_module("nccl"))
    assert err.value.exit_code == 3 and err.value.reference == "library-binding-missing"
    assert "nccl4py is not installed" in err.value.message
    assert err.value.hint == VENDORS["cuda"].library_binding.install_hint


def test_a_missing_part_of_the_binding_itself_counts_as_not_installed():
    with pytest.raises(EnvironmentUnsupported) as err:
        lb.open_binding(describe(fakes.nvidia(2)), environ={}, import_module=_no_module("nccl.core"))
    assert "nccl4py is not installed" in err.value.message


def test_a_missing_dependency_of_the_binding_is_named():
    with pytest.raises(EnvironmentUnsupported) as err:
        lb.open_binding(describe(fakes.nvidia(2)), environ={}, import_module=_no_module("cuda.bindings"))
    assert err.value.exit_code == 3
    assert "installed but its dependency cuda.bindings is missing" in err.value.message
    assert "pip install 'ddplab[nccl]'" in err.value.hint


def test_status_for_env_says_why_without_raising():
    status = lb.binding_status(describe(fakes.nvidia(2)), environ={}, import_module=_no_module("nccl"))
    assert (status.name, status.importable) == ("nccl4py", False)
    assert "not installed" in status.reason and "ddplab[nccl]" in status.hint
    none = lb.binding_status(describe(fakes.musa()), environ={})
    assert (none.name, none.importable) == (None, False) and "no library binding known" in none.reason


def test_a_test_substitute_is_used_on_any_platform_and_named():
    binding = lb.open_binding(describe(fakes.cpu_only()), environ={lb.SUBSTITUTE_ENV: "tests.library_fake:GlooBinding"})
    assert binding.name == "gloo-fake" and binding.substitute == "tests.library_fake:GlooBinding"
    status = binding.available()
    assert status.importable and status.substitute == "tests.library_fake:GlooBinding"


@pytest.mark.parametrize("value", ["tests.library_fake", "tests.library_fake:Missing", "no_such_module:X"])
def test_a_bad_substitute_is_refused(value):
    with pytest.raises(UsageError) as err:
        lb.open_binding(describe(fakes.cpu_only()), environ={lb.SUBSTITUTE_ENV: value})
    assert (err.value.exit_code, err.value.reference) == (2, "library-binding-substitute-invalid")
    assert value in err.value.message


# --- several ranks on one device -------------------------------------------------------------

def test_shared_device_refused_where_the_loaded_library_refuses_it():
    platform = describe(fakes.nvidia(1, loaded="2.28.9"))
    with pytest.raises(EnvironmentUnsupported) as err:
        lb.shared_device_env(platform, True, {})
    assert err.value.exit_code == 3 and err.value.reference == "library-refuses-shared-device"
    assert "NCCL 2.28.9" in err.value.message and "Duplicate GPU detected" in err.value.message
    assert "NCCL_MULTI_RANK_GPU_ENABLE=1" in err.value.message


def test_shared_device_gets_the_switch_even_where_the_policy_chose_gloo():
    platform = describe(fakes.nvidia(1, loaded="2.30.7", built="2.28.9"))  # the loaded version decides
    assert lb.shared_device_env(platform, True, {}) == {"NCCL_MULTI_RANK_GPU_ENABLE": "1"}
    placement_env = {"NCCL_MULTI_RANK_GPU_ENABLE": "1", "CUDA_MPS_PIPE_DIRECTORY": "/run/x"}
    assert lb.shared_device_env(platform, True, placement_env) == placement_env


def test_one_rank_per_device_passes_the_placement_env_through():
    platform = describe(fakes.nvidia(2, loaded="2.28.9"))
    assert lb.shared_device_env(platform, False, {"A": "1"}) == {"A": "1"}


def test_the_env_a_user_exported_wins(monkeypatch):
    monkeypatch.setenv("NCCL_MULTI_RANK_GPU_ENABLE", "0")
    monkeypatch.delenv("DDPLAB_TEST_UNSET", raising=False)
    applied = lb._apply_env({"NCCL_MULTI_RANK_GPU_ENABLE": "1", "DDPLAB_TEST_UNSET": "x"})
    assert applied == {"NCCL_MULTI_RANK_GPU_ENABLE": "0", "DDPLAB_TEST_UNSET": "x"}


# --- the unique id through a c10d store ------------------------------------------------------

def test_the_root_publishes_the_id_and_the_others_read_it():
    import torch.distributed as dist

    store = dist.HashStore()
    made = []

    def make():
        made.append(b"\x01" * 128)
        return made[-1]

    got_root = lb.exchange_unique_id(store, "k/unique-id", True, make)
    got_other = lb.exchange_unique_id(store, "k/unique-id", False, lambda: pytest.fail("only the root makes one"))
    assert got_root == got_other == b"\x01" * 128 and len(made) == 1


def test_each_communicator_of_a_group_gets_its_own_key():
    first, second = lb._next_key("grp-test-keys"), lb._next_key("grp-test-keys")
    assert first != second and first.startswith("ddplab/library-binding/grp-test-keys/")
    assert lb._next_key("other-group").endswith("/0/unique-id")


def test_the_id_crosses_two_processes_through_a_tcp_store(tmp_path):
    """Rank 1 in another process reads what rank 0 (this process) published in a real TCPStore."""
    import subprocess

    import torch.distributed as dist

    store = dist.TCPStore("127.0.0.1", 0, 2, is_master=True, wait_for_workers=False)
    reader = f"""
import sys
sys.path[:0] = {[str(Path(lb.__file__).resolve().parents[2]), str(ROOT)]!r}
import torch.distributed as dist
from ddplab.collectives.common import LibraryCall
from ddplab.platform import library_binding as lb
from ddplab.platform.library_calls import check_call
from ddplab.platform.nccl4py import Nccl4pyAdapter
store = dist.TCPStore("127.0.0.1", {store.port}, 2, is_master=False)
got = lb.exchange_unique_id(store, "job/unique-id", False, lambda: b"not the root")
open({str(tmp_path / "got")!r}, "wb").write(got)
"""
    child = subprocess.Popen([sys.executable, "-c", reader])
    try:
        published = lb.exchange_unique_id(store, "job/unique-id", True, lambda: bytes(range(128)))
        assert child.wait(timeout=60) == 0
    finally:
        child.kill()
    assert (tmp_path / "got").read_bytes() == published == bytes(range(128))


# --- the nccl4py adapter against a stand-in with nccl4py 0.6.0's signatures -------------------

class _Recorder:
    """Stands in for nccl.bindings.nccl: records every call with its arguments."""

    def __init__(self):
        self.log = []

    def __getattr__(self, name):
        return lambda *args: self.log.append((name, *args))


def _stand_in_modules():
    core = types.SimpleNamespace(
        NcclDataType=types.SimpleNamespace(FLOAT32=7, FLOAT64=8, FLOAT16=6, BFLOAT16=9, INT32=2, INT64=4, INT8=0,
                                           UINT8=1),
        NcclRedOp=types.SimpleNamespace(SUM=0), get_unique_id=lambda: b"\x07" * 128)
    bindings = _Recorder()
    return bindings, {"nccl.bindings.nccl": bindings, "nccl.core": core}.__getitem__


def test_nvidia_opens_the_nccl4py_adapter_when_the_binding_imports():
    bindings, importer = _stand_in_modules()
    binding = lb.open_binding(describe(fakes.nvidia(2)), environ={}, import_module=importer)
    assert binding.name == "nccl4py" and isinstance(binding.adapter, Nccl4pyAdapter)
    assert binding.adapter.new_unique_id() == b"\x07" * 128


def test_nccl4py_calls_get_pointers_counts_codes_then_comm_and_stream():
    import torch

    bindings, importer = _stand_in_modules()
    adapter = Nccl4pyAdapter(bindings, importer)
    stream = types.SimpleNamespace(cuda_stream=0x5EED)
    buf = torch.zeros(8)
    ag_out = torch.zeros(8, dtype=torch.bfloat16)
    calls = {
        "all_reduce": LibraryCall("all_reduce", 8, send=buf, recv=buf, op="sum"),
        "all_gather": LibraryCall("all_gather", 4, send=ag_out[4:], recv=ag_out),
        "broadcast": LibraryCall("broadcast", 8, send=buf, recv=buf, root=0),
        "reduce": LibraryCall("reduce", 8, send=buf, recv=buf, root=0, op="sum"),
    }
    for call in calls.values():
        adapter.bind((call,), "COMM", stream)()
    p, q = buf.data_ptr(), ag_out.data_ptr()
    assert bindings.log == [
        ("all_reduce", p, p, 8, 7, 0, "COMM", 0x5EED),
        ("all_gather", q + 4 * 2, q, 4, 9, "COMM", 0x5EED),
        ("broadcast", p, p, 8, 7, 0, "COMM", 0x5EED),
        ("reduce", p, p, 8, 7, 0, 0, "COMM", 0x5EED),
    ]


def test_nccl4py_groups_sends_and_receives_in_one_group():
    import torch

    bindings, importer = _stand_in_modules()
    adapter = Nccl4pyAdapter(bindings, importer)
    send, recv = torch.ones(4, dtype=torch.int32), torch.zeros(4, dtype=torch.int32)
    issue = adapter.bind((LibraryCall("send", 4, send=send, peer=1), LibraryCall("recv", 4, recv=recv, peer=1)),
                         "COMM", types.SimpleNamespace(cuda_stream=3))
    assert bindings.log == []  # nothing issued while binding
    issue()
    assert bindings.log == [("group_start",), ("send", send.data_ptr(), 4, 2, 1, "COMM", 3),
                            ("recv", recv.data_ptr(), 4, 2, 1, "COMM", 3), ("group_end",)]


def test_nccl4py_refuses_a_dtype_it_has_no_code_for():
    import torch

    bindings, importer = _stand_in_modules()
    buf = torch.zeros(2, dtype=torch.complex64)
    with pytest.raises(ValueError, match="no data type for torch.complex64"):
        Nccl4pyAdapter(bindings, importer).bind((LibraryCall("all_reduce", 2, send=buf, recv=buf),), "C",
                                                   types.SimpleNamespace(cuda_stream=0))


# --- calls are checked against their buffers before anything is issued ------------------------

def test_a_count_that_does_not_fit_its_buffer_is_refused():
    import torch

    out = torch.zeros(8)
    check_call(LibraryCall("all_gather", 4, send=out[:4], recv=out), 2)  # fits
    with pytest.raises(ValueError, match="recv buffer holds 8 elements.*needs 12"):
        check_call(LibraryCall("all_gather", 4, send=out[:4], recv=out), 3)
    with pytest.raises(ValueError, match="not contiguous"):
        check_call(LibraryCall("all_reduce", 4, send=out[::2], recv=out[::2]), 2)
    with pytest.raises(ValueError, match="no send buffer"):
        check_call(LibraryCall("send", 4, recv=out[:4], peer=1), 2)
    with pytest.raises(ValueError, match='unknown library call "alltoall"'):
        check_call(LibraryCall("alltoall", 4, send=out, recv=out), 2)


# --- communicators in a one-rank group ---------------------------------------------------------

@pytest.fixture()
def one_rank_group(tmp_path):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


class _RefusingBinding:
    """A substitute whose library refuses every communicator."""

    name = "refusing"

    def new_unique_id(self) -> bytes:
        return b"\x00" * 128

    def open(self, world_size, rank, unique_id, device_index):
        raise RuntimeError("ncclInvalidUsage: invalid usage")


def test_a_communicator_is_made_through_the_group_store_and_the_key_removed(one_rank_group):
    import torch

    binding = lb.open_binding(describe(fakes.cpu_only()), environ={lb.SUBSTITUTE_ENV: "tests.library_fake:GlooBinding"})
    with binding.communicator(device_index=None) as comm:
        assert (comm.rank, comm.world_size) == (0, 1)
        buf = torch.ones(4)
        comm.bind([LibraryCall("all_reduce", 4, send=buf, recv=buf, op="sum")])()
        assert buf.tolist() == [1.0] * 4
    assert len(binding.adapter.unique_ids) == 1
    import torch.distributed as dist

    group = dist.group.WORLD.group_name
    assert not any(lb.group_store().check([f"ddplab/library-binding/{group}/{i}/unique-id"]) for i in range(3))


def test_a_refused_communicator_is_exit_3_naming_the_rank(one_rank_group):
    binding = lb.open_binding(describe(fakes.cpu_only()), environ={lb.SUBSTITUTE_ENV: f"{__name__}:_RefusingBinding"})
    with pytest.raises(EnvironmentUnsupported) as err:
        binding.communicator(device_index=None)
    assert err.value.exit_code == 3 and err.value.reference == "library-communicator-failed"
    assert "rank 0 of 1" in err.value.message and "ncclInvalidUsage" in err.value.message


def test_several_ranks_per_device_are_refused_before_the_store_is_touched(one_rank_group):
    nvidia = describe(fakes.nvidia(1, loaded="2.28.9"))
    binding = lb.open_binding(nvidia, environ={lb.SUBSTITUTE_ENV: "tests.library_fake:GlooBinding"})
    with pytest.raises(EnvironmentUnsupported) as err:
        binding.communicator(device_index=0, shared_device=True)
    assert err.value.reference == "library-refuses-shared-device"
    assert binding.adapter.unique_ids == []  # no id made, no communicator attempted
