"""What ddplab knows about each accelerator vendor, as data.

This table is the only place that names vendors' devices, libraries, tools and knobs: adding a vendor means
adding one ``Vendor`` entry, not ``if`` chains. Facts are the libraries' documented ones and what was measured
(docs/background.md); where a fact was not verified on hardware, the README says so.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Knob:
    """An environment variable that changes how failures are detected or reported."""

    name: str
    default: str  # the library's documented default when unset
    meaning: str


@dataclass(frozen=True)
class SharedDeviceCosts:
    """One tiny all_reduce with several ranks on one device, per setup (docs/shared-device.md)."""

    measured_on: str
    with_daemon_us: float  # the vendor backend with the sharing daemon
    without_daemon_us: float  # the vendor backend alone: ranks time-slice the device
    gloo_us: float
    gloo_with_daemon_us: float | None = None  # gloo under the sharing daemon (it stages through the host)


@dataclass(frozen=True)
class MultiRankRule:
    """Whether (and from which library version) several ranks may share one device."""

    min_version: tuple[int, int, int] | None  # None: never allowed
    enable_env: dict[str, str]  # what must be set to allow it
    refusal: str  # the library's own words when it refuses
    sharing_daemon: str | None = None  # e.g. MPS: without it ranks time-slice
    costs: SharedDeviceCosts | None = None  # measured, when known

    @property
    def version_needed(self) -> str:
        return ".".join(str(p) for p in self.min_version or ())

    @property
    def switch(self) -> str:
        """The settings that allow it, as a shell would set them."""
        return " ".join(f"{k}={v}" for k, v in self.enable_env.items())


@dataclass(frozen=True)
class BindingSpec:
    """The vendor's official Python binding for calling its collective library directly, without the framework in
    between (``platform/library_binding.py`` is the only module that imports it)."""

    name: str  # what users call it
    distribution: str  # its package on PyPI
    tested_version: str  # the release ddplab's calls were written against
    module: str  # what ddplab imports to reach the library's calls
    adapter: str  # which class in platform/library_binding.py speaks to it
    extra: str  # ddplab's optional dependency group that installs it
    requires: tuple[str, ...] = ()  # what it needs at import time besides itself
    debug_hint: str | None = None  # how to make the library say why it refused a communicator

    @property
    def install_hint(self) -> str:
        return (f"pip install 'ddplab[{self.extra}]' (or: pip install {self.distribution}~={self.tested_version} "
                f"{' '.join(self.requires)})")


@dataclass(frozen=True)
class RasService:
    """The collective library's own health service, asked over a text protocol (`ddplab launch --ras`): one
    process per machine listens on ``default_address`` (or ``address_env``) and answers a status query with what
    every process of the job reports (docs/flight-recorder.md). ``caution`` is why ddplab asks only when told to.
    """

    name: str  # what users call it
    since: tuple[int, int, int]  # the first release that has it
    address_env: str  # host:port it listens on, per job
    default_address: str
    enable_env: str  # set to one of ``disabled_values``, the service is off
    disabled_values: tuple[str, ...]
    hello: str  # the client's first line
    hello_answer: str  # what the service's first line starts with
    status: str  # the query: the answer follows, and the service closes the connection
    json_format: str | None = None  # asks for JSON instead of text, answered by ``ok``
    json_since: tuple[int, int, int] | None = None
    ok: str = "OK"
    # The service waits up to its per-leg timeout (5 s, twice) for every process's part: a job with a dead process
    # can take ten seconds to answer.
    handshake_timeout_s: float = 2.0
    answer_within_s: float = 12.0
    caution: str = ""


@dataclass(frozen=True)
class Vendor:
    device_type: str  # torch device type: "cuda", "musa", ...
    vendor: str  # who makes it
    backend: str  # torch.distributed backend for this device
    collective_library: str | None  # human name of the collective library
    plugin_module: str | None = None  # out-of-tree torch plug-in to import, if any
    library_names: tuple[str, ...] = ()  # shared objects to look for in /proc/self/maps
    version_symbol: str | None = None  # C function returning the loaded version as int
    # Framework libraries that link the collective library: where its symbols bind when the global scope lacks them.
    collective_linked_by: tuple[str, ...] = ()
    management_tool: str | None = None  # CLI that shows devices and processes
    sharing_daemon_processes: tuple[str, ...] = ()  # process names of a device-sharing daemon
    sharing_daemon_control: str | None = None  # the daemon's control binary
    # A script beside this module that is the daemon's first client without importing torch; None: torch itself.
    sharing_daemon_client: str | None = None
    visible_devices_env: str | None = None
    device_node_globs: tuple[str, ...] = ()  # /dev nodes a process holding the device has open
    env_names: tuple[str, ...] = ()  # environment variables worth showing, besides knobs (exact names)
    knobs: tuple[Knob, ...] = ()
    multi_rank: MultiRankRule | None = None
    per_process_memory_api: str | None = None  # how memory per process is read, or None
    blocking_wait_env: str | None = None  # makes a timed-out wait() raise in Python instead of aborting
    socket_interface_env: str | None = None  # pins the collective library's sockets to one network interface
    library_binding: BindingSpec | None = None  # None: no library binding known
    ras: RasService | None = None  # None: the collective library has no health service to ask


NVIDIA = Vendor(
    device_type="cuda",
    blocking_wait_env="TORCH_NCCL_BLOCKING_WAIT",
    vendor="NVIDIA",
    backend="nccl",
    collective_library="NCCL",
    library_names=("libnccl.so",),
    version_symbol="ncclGetVersion",
    collective_linked_by=("libtorch_cuda.so",),
    management_tool="nvidia-smi",
    sharing_daemon_processes=("nvidia-cuda-mps-control", "nvidia-cuda-mps-server"),
    sharing_daemon_control="nvidia-cuda-mps-control",
    sharing_daemon_client="cuda_client.py",
    visible_devices_env="CUDA_VISIBLE_DEVICES",
    device_node_globs=("/dev/nvidia[0-9]*",),
    socket_interface_env="NCCL_SOCKET_IFNAME",
    env_names=("NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", "NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_SHM_DISABLE",
               "NCCL_IB_DISABLE", "NCCL_NVLS_ENABLE", "NCCL_CUMEM_ENABLE", "NCCL_BUFFSIZE", "NCCL_MAX_CTAS",
               "NCCL_RAS_ENABLE", "NCCL_ALGO", "NCCL_PROTO", "NCCL_NET", "NCCL_VERSION", "TORCH_FR_BUFFER_SIZE",
               "TORCH_FR_DUMP_TEMP_FILE", "CUDA_VERSION", "CUDA_HOME", "CUDA_LAUNCH_BLOCKING",
               "CUDA_DEVICE_MAX_CONNECTIONS", "CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY",
               "PYTORCH_CUDA_ALLOC_CONF", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"),
    knobs=(
        Knob("TORCH_NCCL_ASYNC_ERROR_HANDLING", "3",
             "3 = tear down without ncclCommAbort; torchrun/elastic sets 1 for its workers"),
        Knob("TORCH_NCCL_BLOCKING_WAIT", "0",
             "1 = wait() raises a Python exception after the timeout instead of SIGABRT"),
        Knob("TORCH_NCCL_ENABLE_MONITORING", "1", "heartbeat monitor that kills a stuck watchdog"),
        Knob("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", "480", "seconds before the heartbeat monitor kills"),
        Knob("TORCH_NCCL_DUMP_ON_TIMEOUT", "1", "dump the flight recorder on timeout"),
        Knob("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000", "flight-recorder entries per rank"),
        Knob("TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC", "15000", "extra wait for the dump before abort"),
        Knob("TORCH_NCCL_DESYNC_DEBUG", "0", "report which ranks lag on a timeout"),
        Knob("NCCL_MULTI_RANK_GPU_ENABLE", "0",
             "NCCL >= 2.30: allow several ranks of one communicator on one GPU"),
        Knob("NCCL_DEBUG", "(off)", "NCCL's own logging: VERSION, WARN, INFO, TRACE"),
    ),
    multi_rank=MultiRankRule(
        min_version=(2, 30, 0),
        enable_env={"NCCL_MULTI_RANK_GPU_ENABLE": "1"},
        refusal="Duplicate GPU detected",
        sharing_daemon="MPS",
        costs=SharedDeviceCosts(measured_on="one H200, 2 ranks, 4-byte all_reduce, NCCL 2.30.7",
                                with_daemon_us=45.0, without_daemon_us=4501.7, gloo_us=390.0,
                                gloo_with_daemon_us=216.0),
    ),
    per_process_memory_api="NVML",
    # NVIDIA's own binding; its bindings layer is as fast as CuPy's (docs/background.md §5).
    library_binding=BindingSpec(
        name="nccl4py", distribution="nccl4py", tested_version="0.6.0", module="nccl.bindings.nccl",
        adapter="nccl4py", extra="nccl",
        requires=("cuda-bindings", "cuda-core", "cuda-pathfinder", "numpy"),
        debug_hint="NCCL_DEBUG=WARN prints NCCL's own reason"),
    ras=RasService(
        name="NCCL RAS", since=(2, 24, 0), address_env="NCCL_RAS_ADDR", default_address="localhost:28028",
        enable_env="NCCL_RAS_ENABLE", disabled_values=("0",), hello="CLIENT PROTOCOL 2",
        hello_answer="SERVER PROTOCOL", status="VERBOSE STATUS", json_format="SET FORMAT json",
        json_since=(2, 28, 7),
        caution="queries have crashed jobs: NVIDIA/nccl#1762 (2.27.3), #1996 (2.27.7), #2346 (2.29.7, open)"),
)

MOORE_THREADS = Vendor(
    device_type="musa",
    blocking_wait_env="TORCH_MCCL_BLOCKING_WAIT",
    vendor="Moore Threads",
    plugin_module="torch_musa",
    backend="mccl",
    collective_library="MCCL",
    library_names=("libmccl.so",),
    version_symbol="mcclGetVersion",
    management_tool="mthreads-gmi",
    visible_devices_env="MUSA_VISIBLE_DEVICES",
    device_node_globs=("/dev/mtgpu*",),
    socket_interface_env="MCCL_SOCKET_IFNAME",  # seen in public scripts; not run here (docs/exposure.md)
    env_names=("MCCL_DEBUG", "MCCL_DEBUG_SUBSYS", "MCCL_P2P_DISABLE", "MCCL_IB_DISABLE", "MCCL_BUFFSIZE",
               "MUSA_LAUNCH_BLOCKING", "PYTORCH_MUSA_ALLOC_CONF", "MTHREADS_VISIBLE_DEVICES"),
    knobs=(
        Knob("TORCH_MCCL_ASYNC_ERROR_HANDLING", "3", "torch_musa's mirror of TORCH_NCCL_ASYNC_ERROR_HANDLING"),
        Knob("TORCH_MCCL_BLOCKING_WAIT", "0", "1 = wait() raises after the timeout"),
        Knob("TORCH_MCCL_DUMP_ON_TIMEOUT", "0", "flight-recorder dump on timeout (off in torch_musa)"),
        Knob("TORCH_MCCL_TRACE_BUFFER_SIZE", "0", "flight-recorder entries (off in torch_musa)"),
    ),
    # Not documented by the vendor: ddplab runs it and reports what happens.
    multi_rank=None,
    per_process_memory_api=None,  # pymtml has no per-process memory call
)

ASCEND = Vendor(
    device_type="npu",
    blocking_wait_env="TORCH_HCCL_BLOCKING_WAIT",
    vendor="Huawei Ascend",
    plugin_module="torch_npu",
    backend="hccl",
    collective_library="HCCL",
    library_names=("libhccl.so",),
    management_tool="npu-smi",
    visible_devices_env="ASCEND_RT_VISIBLE_DEVICES",
    device_node_globs=("/dev/davinci[0-9]*",),
    socket_interface_env="HCCL_SOCKET_IFNAME",  # CANN documents it; not run here (docs/exposure.md)
    env_names=("HCCL_BUFFSIZE", "HCCL_IF_IP", "HCCL_EVENT_TIMEOUT", "HCCL_WHITELIST_DISABLE",
               "TORCH_HCCL_TRACE_BUFFER_SIZE", "TORCH_HCCL_WAIT_TIMEOUT_DUMP_MILSEC", "TORCH_HCCL_DESYNC_DEBUG"),
    knobs=(
        Knob("HCCL_CONNECT_TIMEOUT", "120", "seconds HCCL waits for peers when building links"),
        Knob("HCCL_EXEC_TIMEOUT", "1800", "seconds a collective may run before HCCL reports it"),
        Knob("TORCH_HCCL_ENABLE_MONITORING", "0", "heartbeat monitor (off in torch_npu)"),
        Knob("TORCH_HCCL_HEARTBEAT_TIMEOUT_SEC", "600", "heartbeat monitor timeout"),
        Knob("TORCH_HCCL_DUMP_ON_TIMEOUT", "0", "flight-recorder dump on timeout (off in torch_npu)"),
        Knob("TORCH_HCCL_BLOCKING_WAIT", "0", "1 = wait() raises after the timeout"),
    ),
    per_process_memory_api="npu-smi process table (not read by ddplab yet)",
)

INTEL = Vendor(
    device_type="xpu",
    blocking_wait_env="TORCH_XCCL_BLOCKING_WAIT",
    vendor="Intel",
    backend="xccl",
    collective_library="oneCCL",
    library_names=("libccl.so",),
    management_tool="xpu-smi",
    visible_devices_env="ZE_AFFINITY_MASK",
    device_node_globs=("/dev/dri/renderD*",),
    # oneCCL's interface variable is not verified: ddplab pins nothing for it and says so.
    env_names=("CCL_LOG_LEVEL", "CCL_ATL_TRANSPORT", "ONEAPI_DEVICE_SELECTOR"),
    knobs=(
        Knob("TORCH_XCCL_BLOCKING_WAIT", "0", "1 = wait() raises after the timeout"),
        Knob("TORCH_XCCL_HEARTBEAT_TIMEOUT_SEC", "480", "heartbeat monitor timeout"),
        Knob("TORCH_XCCL_WAIT_TIMEOUT_DUMP_MILSEC", "15000", "extra wait for the dump before abort"),
    ),
)

HOST_CPU = Vendor(
    device_type="cpu",
    vendor="host CPU",
    backend="gloo",
    collective_library="Gloo",
    socket_interface_env="GLOO_SOCKET_IFNAME",
    env_names=("GLOO_DEVICE_TRANSPORT", "OMP_NUM_THREADS"),
    # Every rank on a CPU host shares it; gloo has no objection.
    multi_rank=MultiRankRule(min_version=(0, 0, 0), enable_env={}, refusal=""),
)

VENDORS: dict[str, Vendor] = {v.device_type: v for v in (NVIDIA, MOORE_THREADS, ASCEND, INTEL, HOST_CPU)}

# Plug-ins are imported in this order before asking torch which accelerator it has: they register their device type
# with torch only once imported.
PLUGIN_ORDER = tuple(v for v in VENDORS.values() if v.plugin_module)

# Backends a user may name: each vendor's and torch's own. Which are usable here is probed at run time.
KNOWN_BACKENDS = tuple(dict.fromkeys(("gloo", *(v.backend for v in VENDORS.values()), "mpi", "ucc")))

# Environment shown by `ddplab env` and written into reports: only names ddplab knows, matched exactly (prefixes let
# RANKING_API_KEY and GLOO_TOKEN through); values that look like secrets are redacted on top of this.
GENERIC_ENV_NAMES = (
    # what elastic gives each rank, and the launcher's own knobs
    "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
    "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_NAME", "ROLE_WORLD_SIZE", "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_USE_AGENT_STORE",
    "TORCHELASTIC_ERROR_FILE", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "USE_LIBUV",
    # torch.distributed's debugging and allocator knobs
    "TORCH_DISTRIBUTED_DEBUG", "TORCH_CPP_LOG_LEVEL", "TORCH_SHOW_CPP_STACKTRACES", "PYTORCH_ALLOC_CONF",
    "TORCH_DEVICE_BACKEND_AUTOLOAD",
    # ddplab's own markers (launch.py)
    "DDPLAB_RUN_ID", "DDPLAB_RUN_DIR", "DDPLAB_LAUNCHER_PID", "DDPLAB_DEBUG", "DDPLAB_NODE_ADDR",
    "DDPLAB_STATUS_STORE", "DDPLAB_HOST_MEMORY_BUDGET",
)


def _vendor_env_names(vendor: Vendor) -> tuple[str, ...]:
    """Every variable the vendor table itself names: knobs, device selection, sockets, RAS, extras."""
    named = (vendor.visible_devices_env, vendor.blocking_wait_env, vendor.socket_interface_env)
    enable = tuple(vendor.multi_rank.enable_env) if vendor.multi_rank else ()
    ras = (vendor.ras.address_env, vendor.ras.enable_env) if vendor.ras else ()
    return tuple(n for n in named if n) + enable + ras + tuple(k.name for k in vendor.knobs) + vendor.env_names


ENV_WHITELIST = frozenset(GENERIC_ENV_NAMES).union(*(_vendor_env_names(v) for v in VENDORS.values()))


def env_whitelisted(name: str) -> bool:
    return name in ENV_WHITELIST


def socket_interface_envs(vendor: Vendor) -> tuple[str, ...]:
    """Variables that choose the interface the ranks' collective sockets listen on: the vendor's library's, and
    gloo's on every device (ranks sharing one device may run gloo)."""
    names = (vendor.socket_interface_env, HOST_CPU.socket_interface_env)
    return tuple(dict.fromkeys(n for n in names if n))


@dataclass(frozen=True)
class KnobReading:
    name: str
    default: str
    effective: str
    source: str  # "environment" or "default"
    meaning: str


def read_knobs(vendor: Vendor, environ: dict[str, str]) -> list[KnobReading]:
    return [
        KnobReading(k.name, k.default, environ.get(k.name, k.default),
                    "environment" if k.name in environ else "default", k.meaning)
        for k in vendor.knobs
    ]
