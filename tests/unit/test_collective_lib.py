"""Reading the LOADED collective library's version."""

from ddplab.platform.collective_lib import decode_version, find_loaded, mapped_paths, version_tuple


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
    lib = find_loaded(("libnccl.so",), "ncclGetVersion", str(maps))
    assert lib.path == "/opt/nccl/lib/libnccl.so.2"
    assert lib.version is None  # the file does not exist here, so it cannot be asked


def test_find_loaded_returns_none_when_not_mapped(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text("7f00-7f01 r-xp 00000000 00:00 0 /usr/lib/libc.so.6\n")
    assert find_loaded(("libnccl.so",), "ncclGetVersion", str(maps)) is None
