"""The collective library this process's calls really BIND to, and every copy that is mapped.

torch reports the version it was BUILT against, which differs from the loaded one when a newer library is
preloaded; with ``LD_PRELOAD`` two copies can be mapped at once (torch's wheel copy by absolute path, while its
calls bind to the preloaded one), and /proc/self/maps says nothing about binding. So we ask the way the dynamic
linker resolves a symbol: the version symbol through the global scope (``dlsym(RTLD_DEFAULT)``), else through the
local scope of the framework library that links the collective library; ``dladdr`` on the function pointer names
the file that DEFINES it, and calling it gives the version. Vendor-neutral: names come from ``vendors.py``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from dataclasses import dataclass

from .facts import LoadedLibrary

RTLD_DEFAULT = None  # dlsym's pseudo-handle for the global scope (a null pointer)
_VERSION_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int))


@dataclass(frozen=True)
class CollectiveLibraries:
    """What is mapped, and which copy calls bind to."""

    bound: LoadedLibrary | None
    copies: tuple[LoadedLibrary, ...]  # every mapped copy, the bound one marked by bound_via


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


class _Linker:
    """dlopen/dlsym/dladdr/dlclose through ctypes (in libc since glibc 2.34, libdl before)."""

    def __init__(self):
        lib = ctypes.CDLL(None)
        if not hasattr(lib, "dladdr"):
            lib = ctypes.CDLL("libdl.so.2")
        self.dlopen = lib.dlopen
        self.dlopen.restype, self.dlopen.argtypes = ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_int]
        self.dlsym = lib.dlsym
        self.dlsym.restype, self.dlsym.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_char_p]
        self.dladdr = lib.dladdr
        self.dladdr.restype, self.dladdr.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
        self.dlclose = lib.dlclose
        self.dlclose.restype, self.dlclose.argtypes = ctypes.c_int, [ctypes.c_void_p]

    def symbol(self, handle, name: str) -> int | None:
        return self.dlsym(handle, name.encode()) or None

    def defining_file(self, address: int) -> str | None:
        info = _DlInfo()
        if not self.dladdr(address, ctypes.byref(info)) or not info.dli_fname:
            return None
        return os.path.realpath(info.dli_fname.decode())

    def in_local_scope(self, path: str, name: str) -> int | None:
        """Resolve ``name`` the way ``path`` (already mapped) sees it in its own dependency tree."""
        handle = self.dlopen(path.encode(), os.RTLD_LAZY | os.RTLD_NOLOAD)  # never loads anything new
        if not handle:
            return None
        try:
            return self.symbol(handle, name)
        finally:
            self.dlclose(handle)


def mapped_paths(maps_file: str = "/proc/self/maps") -> list[str]:
    """Paths of the files mapped into this process, in address order, each once."""
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
    """Decode NCCL-style integer versions: major*10000 + minor*100 + patch since 2.9, major*1000 + ... before."""
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def find_copies(library_names: tuple[str, ...], version_symbol: str | None,
                linked_by: tuple[str, ...] = (), maps_file: str = "/proc/self/maps") -> CollectiveLibraries:
    """Every mapped copy of the library (file name starting with one of ``library_names``), with its own version,
    and the one calls bind to. ``linked_by``: the framework libraries that link it, asked first for their scope."""
    paths = mapped_paths(maps_file)
    copy_paths = [p for p in paths if os.path.basename(p).startswith(library_names)]
    linker = _linker()
    binding = _resolve_binding(linker, version_symbol, paths, copy_paths, linked_by) if linker else None
    copies = [LoadedLibrary(p, _copy_version(linker, p, version_symbol)) for p in copy_paths]
    if binding is None:
        if len(copies) == 1:  # nothing to choose between: the only copy is the one in use
            copies[0] = LoadedLibrary(copies[0].path, copies[0].version, "the only mapped copy")
    else:
        path, address, via = binding
        bound = LoadedLibrary(path, _call_version(address), via)
        copies = [bound if same_file(c.path, path) else c for c in copies]
        if not any(same_file(c, path) for c in copy_paths):
            copies.append(bound)  # defined by a file of another name, e.g. linked statically into the framework
    bound_copy = next((c for c in copies if c.bound_via), None)
    return CollectiveLibraries(bound_copy, tuple(copies))


def _resolve_binding(linker: _Linker, symbol: str | None, paths: list[str], copy_paths: list[str],
                     linked_by: tuple[str, ...]) -> tuple[str, int, str] | None:
    """(defining file, function address, how it was found), or None when the symbol resolves nowhere."""
    if not symbol:
        return None
    address = linker.symbol(RTLD_DEFAULT, symbol)
    if address:
        return _defined_in(linker, address), address, "global scope (LD_PRELOAD / RTLD_GLOBAL first)"
    # Only shared objects are asked: dlopen would open any other mapped file (device nodes too).
    objects = [p for p in paths if ".so" in os.path.basename(p) and p not in copy_paths]
    named = [p for p in objects if linked_by and os.path.basename(p).startswith(linked_by)]
    others = [p for p in objects if p not in named]
    for framework in named + others:
        address = linker.in_local_scope(framework, symbol)
        if address:
            return _defined_in(linker, address), address, f"local scope of {framework}"
    return None


def _defined_in(linker: _Linker, address: int) -> str:
    return linker.defining_file(address) or "(file not known to dladdr)"


def _copy_version(linker: _Linker | None, path: str, symbol: str | None) -> str | None:
    """The version this copy itself reports (its own definition, not one it would find elsewhere)."""
    if not linker or not symbol:
        return None
    address = linker.in_local_scope(path, symbol)
    if not address or not same_file(linker.defining_file(address), path):
        return None
    return _call_version(address)


def _call_version(address: int) -> str | None:
    code = ctypes.c_int(0)
    if _VERSION_FN(address)(ctypes.byref(code)) != 0 or code.value <= 0:
        return None
    return decode_version(code.value)


def _linker() -> _Linker | None:
    with contextlib.suppress(OSError, AttributeError):  # not a glibc-like system: nothing can be asked
        return _Linker()
    return None


def same_file(a: str | None, b: str | None) -> bool | None:
    """None where either path is unknown."""
    if not a or not b:
        return None
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def version_tuple(version: str | None) -> tuple[int, ...] | None:
    if not version:
        return None
    with contextlib.suppress(ValueError):
        return tuple(int(p) for p in version.split(".")[:3])
    return None
