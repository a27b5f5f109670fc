"""The collective library this process actually LOADED, and its version.

torch reports the version it was BUILT against (``torch.cuda.nccl.version()``),
which differs from the loaded one when a newer library is preloaded
(measured.md: built 2.28.9, loaded 2.30.7). Decisions such as "may two ranks
share a GPU" depend on the loaded library, so we ask it directly.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass


@dataclass(frozen=True)
class LoadedLibrary:
    path: str
    version: str | None  # "2.30.7"; None when the library could not be asked


def mapped_paths(maps_file: str = "/proc/self/maps") -> list[str]:
    """Paths of the shared objects mapped into this process, in load order."""
    try:
        with open(maps_file) as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    seen: dict[str, None] = {}
    for line in lines:
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and parts[5].startswith("/"):
            seen.setdefault(parts[5].strip(), None)
    return list(seen)


def decode_version(code: int) -> str:
    """Decode NCCL-style integer versions.

    Since 2.9 the code is major*10000 + minor*100 + patch; before, major*1000 + minor*100 + patch.
    """
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def find_loaded(library_names: tuple[str, ...], version_symbol: str | None,
                maps_file: str = "/proc/self/maps") -> LoadedLibrary | None:
    """The first mapped library whose file name starts with one of ``library_names``."""
    for path in mapped_paths(maps_file):
        name = path.rsplit("/", 1)[-1]
        if not name.startswith(library_names):
            continue
        return LoadedLibrary(path=path, version=_ask_version(path, version_symbol))
    return None


def _ask_version(path: str, symbol: str | None) -> str | None:
    if not symbol:
        return None
    try:
        lib = ctypes.CDLL(path)  # already mapped: dlopen returns the same handle
        fn = getattr(lib, symbol)
    except (OSError, AttributeError):
        return None
    code = ctypes.c_int(0)
    fn.argtypes = [ctypes.POINTER(ctypes.c_int)]
    if fn(ctypes.byref(code)) != 0 or code.value <= 0:
        return None
    return decode_version(code.value)


def version_tuple(version: str | None) -> tuple[int, ...] | None:
    if not version:
        return None
    try:
        return tuple(int(p) for p in version.split(".")[:3])
    except ValueError:
        return None
