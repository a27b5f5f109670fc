"""Reading the collective library that calls really BIND to, and every mapped copy."""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from ddplab.platform.collective_lib import decode_version, find_copies, mapped_paths, version_tuple


def test_decode_version_new_and_old_encodings():
    assert decode_version(23007) == "2.30.7"
    assert decode_version(22809) == "2.28.9"
    assert decode_version(2708) == "2.7.8"  # before NCCL 2.9: major*1000 + minor*100 + patch


def test_version_tuple_compares_numerically():
    assert version_tuple("2.30.7") >= (2, 30, 0)
    assert version_tuple("2.9.1") < (2, 30, 0)
    assert version_tuple(None) is None and version_tuple("x.y") is None


def test_find_loaded_picks_library_from_maps(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text(
        "7f00-7f01 r-xp 00000000 00:00 0 /usr/lib/libc.so.6\n"
        "7f02-7f03 r-xp 00000000 00:00 0 /opt/nccl/lib/libnccl.so.2\n"
        "7f04-7f05 r--p 00000000 00:00 0 /opt/nccl/lib/libnccl.so.2\n"
        "7f06-7f07 rw-p 00000000 00:00 0 [heap]\n")
    assert mapped_paths(str(maps)) == ["/usr/lib/libc.so.6", "/opt/nccl/lib/libnccl.so.2"]
    lib = find_copies(("libnccl.so",), "ncclGetVersion", maps_file=str(maps)).bound
    assert lib.path == "/opt/nccl/lib/libnccl.so.2"
    assert lib.version is None  # the file does not exist here, so it cannot be asked


def test_find_loaded_returns_none_when_not_mapped(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text("7f00-7f01 r-xp 00000000 00:00 0 /usr/lib/libc.so.6\n")
    assert find_copies(("libnccl.so",), "ncclGetVersion", maps_file=str(maps)).bound is None


# --- Real shared objects: two copies of the library, a framework linked against the first ---------------

_LIBRARY_C = "int ncclGetVersion(int *v) { *v = VERSION; return 0; }\n"
_FRAMEWORK_C = textwrap.dedent("""\
    int ncclGetVersion(int *v);
    int framework_calls_version(void) { int v = 0; ncclGetVersion(&v); return v; }
""")

# What torch does on import (its wheel-library preload): dlopen its own copy by absolute path,
# then load the framework library that links it by soname. docs/shared-device.md explains why
# this maps two copies when another one is preloaded.
_PROBE = textwrap.dedent("""\
    import ctypes, json, sys
    own_copy, framework_path, question = sys.argv[1:4]
    ctypes.CDLL(own_copy)
    framework = ctypes.CDLL(framework_path)
    from ddplab.platform import collective_lib
    if question == "bound":
        libs = [collective_lib.find_copies(("libnccl.so",), "ncclGetVersion").bound]
    else:  # every copy, the framework named as the vendor table names libtorch_cuda.so
        libs = collective_lib.find_copies(("libnccl.so",), "ncclGetVersion", ("libframework",)).copies
    print(json.dumps({"calls_reach": framework.framework_calls_version(),
                      "libs": [[lib.path, lib.version, getattr(lib, "bound_via", None)] for lib in libs]}))
""")


@pytest.fixture(scope="module")
def two_copies(tmp_path_factory):
    """old/libnccl.so.2 (2.28.9), new/libnccl.so.2 (2.30.7), fw/libframework.so linked against old/."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is needed to build the test libraries")
    root = tmp_path_factory.mktemp("libs")
    (root / "lib.c").write_text(_LIBRARY_C)
    (root / "fw.c").write_text(_FRAMEWORK_C)
    for name, code in (("old", 22809), ("new", 23007)):
        (root / name).mkdir()
        subprocess.run([gcc, "-shared", "-fPIC", f"-DVERSION={code}", "-Wl,-soname,libnccl.so.2",
                        "-o", str(root / name / "libnccl.so.2"), str(root / "lib.c")], check=True)
    (root / "fw").mkdir()
    subprocess.run([gcc, "-shared", "-fPIC", "-o", str(root / "fw" / "libframework.so"), str(root / "fw.c"),
                    f"-L{root / 'old'}", "-l:libnccl.so.2", f"-Wl,-rpath,{root / 'old'}"], check=True)
    return root


def _probe(root, question: str, preload=None) -> dict:
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = str(preload)
    out = subprocess.run([sys.executable, "-c", _PROBE, str(root / "old" / "libnccl.so.2"),
                          str(root / "fw" / "libframework.so"), question], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_preloaded_copy_is_reported_as_bound(two_copies):
    new = str(two_copies / "new" / "libnccl.so.2")
    seen = _probe(two_copies, "bound", preload=new)
    assert seen["calls_reach"] == 23007  # ground truth: the framework's calls go to the preloaded copy
    [(path, version, via)] = seen["libs"]
    assert (path, version) == (new, "2.30.7")
    assert via.startswith("global scope")


def test_every_mapped_copy_is_listed_with_its_version_and_the_bound_one_marked(two_copies):
    old, new = str(two_copies / "old" / "libnccl.so.2"), str(two_copies / "new" / "libnccl.so.2")
    seen = _probe(two_copies, "copies", preload=new)
    assert seen["calls_reach"] == 23007
    assert sorted(seen["libs"], key=str) == sorted([[old, "2.28.9", None], [new, "2.30.7", seen["libs"][-1][2]]],
                                                   key=str)
    assert [lib[0] for lib in seen["libs"] if lib[2]] == [new]


@pytest.mark.parametrize("question", ["bound", "copies"])
def test_without_preload_the_framework_local_copy_is_bound(two_copies, question):
    # Loaded RTLD_LOCAL, the library is not in the global scope: it is found through the framework's
    # own scope, whether the vendor table names the framework ("copies") or mapped objects are searched.
    old = str(two_copies / "old" / "libnccl.so.2")
    seen = _probe(two_copies, question)
    assert seen["calls_reach"] == 22809
    framework = str(two_copies / "fw" / "libframework.so")
    assert seen["libs"] == [[old, "2.28.9", f"local scope of {framework}"]]


def test_env_lists_every_mapped_copy_and_marks_the_bound_one(monkeypatch):
    from dataclasses import replace

    from ddplab.platform.collective_lib import LoadedLibrary
    from tests.unit import fakes

    venv_copy = "/venv/nvidia/nccl/lib/libnccl.so.2"
    preloaded = "/opt/nccl-2.30.7/libnccl.so.2"
    probe = replace(fakes.nvidia(loaded="2.30.7"), collective_loaded_path=preloaded, collective_loaded_copies=(
        LoadedLibrary(venv_copy, "2.28.9"), LoadedLibrary(preloaded, "2.30.7", "global scope (LD_PRELOAD first)")))
    doc, screen = fakes.env_screen(monkeypatch, probe)
    assert f"NCCL loaded (calls bind here) │ 2.30.7 ({preloaded}) [global scope (LD_PRELOAD first)]" in screen
    assert f"2.28.9 {venv_copy}: mapped, not bound" in screen
    assert f"2.30.7 {preloaded}: BOUND" in screen
    assert doc["platform"]["collective_loaded_copies"][1] == {"path": preloaded, "version": "2.30.7",
                                                              "bound_via": "global scope (LD_PRELOAD first)"}
