"""Calling the collective library directly, through the vendor's own Python binding.

The torch engine times a collective through torch.distributed; the library engine makes the same call on the
same device buffers straight into the library, so the two side by side say what the framework adds per call.

A communicator's unique id crosses processes through the c10d store the default group was built on: no second
rendezvous, no extra port. ``LibraryCommunicator.bind`` resolves pointers, counts and codes once, so each call is
one binding call on the communicator's stream; ``synchronize()`` lets the communicator stand where the timing
helpers take a runtime (N calls then one synchronize is the pipelined mode).

This is the only module that imports a binding; what is specific to one binding lives in its adapter
(``nccl4py.Nccl4pyAdapter``). Tests substitute an adapter through ``DDPLAB_LIBRARY_BINDING=module:attr`` (a
factory called with no arguments), which every rank inherits and which is named wherever the binding is reported.
"""

from __future__ import annotations

import importlib
import itertools
import os
from typing import Callable, Mapping, Protocol, Sequence

from ..collectives.common import LibraryCall
from ..errors import EnvironmentUnsupported, UsageError
from ..records.library_engine import BindingStatus
from .collective_lib import same_file, version_tuple
from .facts import Platform
from .library_calls import check_call
from .nccl4py import Nccl4pyAdapter
from .vendors import BindingSpec

SUBSTITUTE_ENV = "DDPLAB_LIBRARY_BINDING"
_KEY_PREFIX = "ddplab/library-binding"


class BindingAdapter(Protocol):
    """What the generic code needs from one binding. Communicators, streams and calls are the
    adapter's own objects; nothing outside the adapter looks inside them."""

    name: str

    def versions(self) -> dict[str, str | None]: ...  # binding, library, library_path
    def new_unique_id(self) -> bytes: ...
    def open(self, world_size: int, rank: int, unique_id: bytes, device_index: int | None) -> object: ...
    def close(self, comm: object) -> None: ...
    def new_stream(self, device_index: int | None) -> object: ...
    def synchronize(self, stream: object) -> None: ...
    def follow_framework(self, stream: object, device_index: int | None) -> None: ...
    def new_event(self, stream: object) -> object | None: ...  # a timing event on the stream; None: no events
    def bind(self, calls: Sequence[LibraryCall], comm: object, stream: object) -> Callable[[], None]: ...


# --- choosing and importing the binding --------------------------------------------------------

def open_binding(platform: Platform, environ: Mapping[str, str] | None = None,
                 import_module: Callable = importlib.import_module) -> LibraryBinding:
    """The platform's binding, ready to make communicators. Raises EnvironmentUnsupported (exit 3)
    when the vendor has none or it cannot be imported."""
    environ = os.environ if environ is None else environ
    if environ.get(SUBSTITUTE_ENV):
        return _open_substitute(environ[SUBSTITUTE_ENV], platform, import_module)
    spec = platform.spec.library_binding
    if spec is None:
        raise EnvironmentUnsupported(
            "no-library-binding",
            f"no library binding known for {platform.vendor} ({platform.device_type}, "
            f"{platform.collective_library or 'no collective library'}): the library engine cannot run here",
            hint="use the torch engine, which works everywhere torch.distributed does")
    return LibraryBinding(spec.name, _load_adapter(spec, platform, import_module), platform, spec=spec)


def binding_status(platform: Platform, environ: Mapping[str, str] | None = None,
                   import_module: Callable = importlib.import_module) -> BindingStatus:
    """``open_binding`` for ``ddplab env``: never raises."""
    try:
        return open_binding(platform, environ, import_module).available()
    except EnvironmentUnsupported as exc:
        spec = platform.spec.library_binding
        return BindingStatus(spec.name if spec else None, False, exc.message, exc.hint)


def _load_adapter(spec: BindingSpec, platform: Platform, import_module: Callable) -> BindingAdapter:
    """Import the binding and build its adapter (which imports the rest of what it needs)."""
    try:
        return ADAPTERS[spec.adapter](import_module(spec.module), import_module)
    except Exception as exc:  # an import that fails otherwise (a library it loads at import time) too
        missing = getattr(exc, "name", None) if isinstance(exc, ImportError) else None
        own = missing and missing.split(".")[0] == spec.module.split(".")[0]  # a module of the binding itself
        if missing and not own and isinstance(exc, ModuleNotFoundError):
            what = f"{spec.name} is installed but its dependency {missing} is missing"
        elif isinstance(exc, ModuleNotFoundError):
            what = f"{spec.name} is not installed"
        else:
            what = f"{spec.name} could not be imported ({type(exc).__name__}: {exc})"
        raise EnvironmentUnsupported(
            "library-binding-missing",
            f"{what}: the library engine calls {platform.collective_library} through {platform.vendor}'s "
            f"binding {spec.distribution} {spec.tested_version} (module {spec.module})",
            hint=spec.install_hint) from exc


def _open_substitute(target: str, platform: Platform, import_module: Callable) -> LibraryBinding:
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise UsageError(
            "library-binding-substitute-invalid",
            f'{SUBSTITUTE_ENV}="{target}" must name a factory as module:attribute')
    try:
        factory = getattr(import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise UsageError(
            "library-binding-substitute-invalid",
            f'{SUBSTITUTE_ENV}="{target}" cannot be loaded: {type(exc).__name__}: {exc}') from exc
    adapter = factory()
    return LibraryBinding(adapter.name, adapter, platform, substitute=target)


# --- several ranks on one device ---------------------------------------------------------------

def shared_device_env(platform: Platform, shared_device: bool, placement_env: Mapping[str, str]) -> dict[str, str]:
    """The environment the library needs before a communicator is made, or EnvironmentUnsupported where the
    loaded library refuses several ranks on one device. The placement may have chosen gloo for the torch engine;
    the library engine still calls the library, so the rule's own switch is added to what the placement set."""
    env = dict(placement_env)
    rule = platform.spec.multi_rank
    if not shared_device or platform.host_only or rule is None or rule.min_version is None:
        return env  # one rank per device, or a vendor whose rule is unknown: run it and report what happens
    version = platform.collective_loaded_version or platform.collective_built_version
    if (version_tuple(version) or (0,)) < rule.min_version:
        raise EnvironmentUnsupported(
            "library-refuses-shared-device",
            f'{platform.collective_library} {version or "(version unknown)"} refuses several ranks on one device '
            f'("{rule.refusal}"); it needs >= {rule.version_needed} with {rule.switch}',
            hint="give each rank its own device (--per-device), or load a newer library")
    return {**rule.enable_env, **env}


def _apply_env(env: Mapping[str, str]) -> dict[str, str]:
    """Set what is not set yet: a value the user exported wins (and the library says what it makes of it)."""
    applied = {}
    for key, value in env.items():
        if key not in os.environ:
            os.environ[key] = value
        applied[key] = os.environ[key]
    return applied


# --- the unique id, through the job's own store ------------------------------------------------

def group_store():
    """The c10d store the default process group was built on (already prefixed with the group's name). It
    lives in torch's private tables; reading it here spares a second rendezvous and a port."""
    from torch.distributed import distributed_c10d as c10d

    entry = c10d._world.pg_map.get(c10d._get_default_group())
    return entry[1] if entry else c10d._get_default_store()


def exchange_unique_id(store, key: str, is_root: bool, make_id: Callable[[], bytes]) -> bytes:
    """The root makes the id and publishes it; everyone (the root too) reads it back. ``store.get``
    waits for the key up to the store's own timeout."""
    if is_root:
        store.set(key, make_id())
    return bytes(store.get(key))


_serials: dict[str, itertools.count] = {}


def _next_key(group_name: str) -> str:
    """A fresh key per communicator: ranks make their communicators in the same order."""
    serial = next(_serials.setdefault(group_name, itertools.count()))
    return f"{_KEY_PREFIX}/{group_name}/{serial}/unique-id"


# --- binding, communicator ---------------------------------------------------------------------

class LibraryBinding:
    """An imported binding (or a test's substitute) and the platform it serves."""

    def __init__(self, name: str, adapter: BindingAdapter, platform: Platform, spec: BindingSpec | None = None,
                 substitute: str | None = None):
        self.name = name
        self.adapter = adapter
        self.platform = platform
        self.spec = spec
        self.substitute = substitute

    def available(self) -> BindingStatus:
        """Importable; which library its calls reach, and whether that is the copy torch's calls bind to."""
        try:
            found = self.adapter.versions()
        except Exception as exc:  # a binding that imports but cannot reach its library
            return BindingStatus(self.name, False, f"{self.name} imports but cannot reach its library: "
                                                   f"{type(exc).__name__}: {exc}",
                                 self.spec.install_hint if self.spec else None, substitute=self.substitute)
        path = found.get("library_path")
        same = same_file(path, self.platform.collective_loaded_path)
        reason = f"{self.name} {found.get('binding')} calls {self.platform.collective_library or 'its library'} " \
                 f"{found.get('library')}" + (f" at {path}" if path else "")
        if same is False:
            reason += f", not the copy torch's calls bind to ({self.platform.collective_loaded_path})"
        return BindingStatus(self.name, True, reason, None, found.get("binding"), found.get("library"), path, same,
                             self.substitute)

    def communicator(self, *, device_index: int | None, shared_device: bool = False) -> LibraryCommunicator:
        """A communicator over every rank of the job, on ``device_index``. Collective: every rank calls it, in
        the same order as its other communicators."""
        import torch.distributed as dist

        env = _apply_env(shared_device_env(self.platform, shared_device, {}))
        rank, world_size = dist.get_rank(), dist.get_world_size()
        store = group_store()
        key = _next_key(dist.group.WORLD.group_name)
        unique_id = exchange_unique_id(store, key, rank == 0, self.adapter.new_unique_id)
        try:
            comm = self.adapter.open(world_size, rank, unique_id, device_index)
        except Exception as exc:
            raise EnvironmentUnsupported(
                "library-communicator-failed",
                f"{self.name} could not make a communicator for rank {rank} of {world_size} on device "
                f"{device_index}: {type(exc).__name__}: {exc}",
                hint=self.spec.debug_hint if self.spec else None) from exc
        if rank == 0:
            store.delete_key(key)  # every rank joined the communicator, so every rank has read it
        return LibraryCommunicator(self, comm, self.adapter.new_stream(device_index), rank, world_size, device_index,
                                   shared_device, env)


class LibraryCommunicator:
    """One rank's communicator and the stream its calls go on."""

    def __init__(self, binding: LibraryBinding, comm, stream, rank: int, world_size: int, device_index: int | None,
                 shared_device: bool, env: dict[str, str]):
        self.binding = binding
        self._comm = comm
        self._stream = stream
        self.rank = rank
        self.world_size = world_size
        self.device_index = device_index
        self.shared_device = shared_device
        self.env = env

    def bind(self, calls: Sequence[LibraryCall]) -> Callable[[], None]:
        """The calls as one callable (one group when there are several), checked once here: a count
        that does not fit its buffer would let the library read or write past it."""
        if not calls:
            raise ValueError("no library calls to bind")
        for call in calls:
            check_call(call, self.world_size)
        return self.binding.adapter.bind(tuple(calls), self._comm, self._stream)

    def synchronize(self) -> None:
        """Wait until every call issued so far has finished on this communicator's stream."""
        self.binding.adapter.synchronize(self._stream)

    def follow_framework(self) -> None:
        """Make this communicator's stream wait for work torch queued on the device (filling the buffers),
        without blocking the host."""
        self.binding.adapter.follow_framework(self._stream, self.device_index)

    def new_event(self):
        """A device timing event recorded on this communicator's stream (``record()``, ``elapsed_time(end)``
        in ms), or None where the binding has none: the timing helpers take the communicator as a runtime."""
        return self.binding.adapter.new_event(self._stream)

    def close(self) -> None:
        if self._comm is not None:
            self.binding.adapter.close(self._comm)
            self._comm = None

    def __enter__(self) -> LibraryCommunicator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def describe(self) -> dict:
        return {"binding": self.binding.name, "substitute": self.binding.substitute, "rank": self.rank,
                "world_size": self.world_size, "device_index": self.device_index,
                "shared_device": self.shared_device, "env": dict(self.env)}


# Vendor table ``BindingSpec.adapter`` -> the class that speaks to that binding (one module each).
ADAPTERS: dict[str, Callable[..., BindingAdapter]] = {"nccl4py": Nccl4pyAdapter}
