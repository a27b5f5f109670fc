"""Options shared by the commands that start ranks, defined once (pip's cmdoptions)."""

from __future__ import annotations

import argparse

from ..config import RDZV_HOST_CHOICES, LaunchOptions


def add_launch_arguments(parser: argparse.ArgumentParser, nproc_default: int = 2) -> None:
    """Options every multi-rank command shares."""
    parser.add_argument("--nproc", type=int, default=nproc_default, help="ranks on this node (default: %(default)s)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--share-device", dest="placement", action="store_const", const="shared",
                       help="every rank on device 0 with a memory cap (default when nproc > devices)")
    where.add_argument("--per-device", dest="placement", action="store_const", const="per-device",
                       help="rank i on device i")
    where.add_argument("--spread", dest="placement", action="store_const", const="spread",
                       help="rank i on device i mod devices: several ranks on every device")
    parser.set_defaults(placement="auto")
    parser.add_argument("--backend", default="auto", help="collective backend (default: chosen by policy)")
    parser.add_argument("--device", default="auto", help="device type (default: detected accelerator, else cpu)")
    parser.add_argument("--memory-fraction", type=float, default=None,
                        help="allocator cap per rank on a shared device (default: (1 - reserve) / ranks)")
    parser.add_argument("--reserve", type=float, default=0.10,
                        help="device memory left for contexts and buffers (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=120.0, dest="timeout_s",
                        help="process-group timeout in seconds (default: %(default)s)")
    parser.add_argument("--run-dir", default=None, help="directory for logs and results (default: ./ddplab-runs/ID)")
    parser.add_argument("--json", metavar="PATH", help="write the JSON report here")
    parser.add_argument("--nnodes", type=int, default=1,
                        help="machines in the job, each running this command (default: 1)")
    parser.add_argument("--rdzv-endpoint", default=None,
                        help="HOST:PORT of the c10d rendezvous, the same on every machine (default: local)")
    parser.add_argument("--rdzv-host", default="auto", metavar="|".join(RDZV_HOST_CHOICES),
                        help="several machines: host the rendezvous store on this one? auto: when the endpoint is "
                             "one of its interface addresses (default: %(default)s)")
    parser.add_argument("--hang-timeout", type=float, default=None, dest="hang_timeout_s",
                        help="declare a hang when no rank progresses this many seconds (default: off)")
    daemon = parser.add_mutually_exclusive_group()
    daemon.add_argument("--mps", dest="sharing_daemon", action="store_const", const="on",
                        help="insist on the device-sharing daemon (MPS): use a running one, else start a private "
                             "one and stop it afterwards; exit 3 where none can be used")
    daemon.add_argument("--no-mps", dest="sharing_daemon", action="store_const", const="off",
                        help="never use the sharing daemon (ranks sharing a device time-slice it)")
    parser.set_defaults(sharing_daemon="auto")


def launch_options(args) -> LaunchOptions:
    return LaunchOptions(nproc=args.nproc, placement=args.placement, backend=args.backend, device=args.device,
                         memory_fraction=args.memory_fraction, reserve=args.reserve, timeout_s=args.timeout_s,
                         run_dir=args.run_dir, sharing_daemon=args.sharing_daemon,
                         hang_timeout_s=args.hang_timeout_s, nnodes=args.nnodes,
                         rdzv_endpoint=args.rdzv_endpoint, rdzv_host=args.rdzv_host)


def require_fits(platform, placement, bytes_per_rank: int, what: str, reference: str, hint: str) -> None:
    """Refuse, before any rank starts, buffers that the memory the ranks run on cannot hold.

    On the host every rank draws on the host's available memory; on a device, the ranks
    placed on it share its free memory and each is held to its allocator cap (policy.py).
    A memory size nobody could read (None) is not judged.
    """
    from ..errors import UsageError
    from ..report import human_bytes

    indices = placement.device_indices
    for index in sorted(set(indices)):
        device = platform.devices[0 if placement.host_only else index] if platform.devices else None
        if device is None or device.free_bytes is None:
            continue
        ranks = len(indices) if placement.host_only else indices.count(index)
        need = bytes_per_rank * ranks
        where = "in host memory" if placement.host_only else f"on device {index} ({device.name})"
        if need > device.free_bytes:
            raise UsageError(reference, f"{what} needs about {human_bytes(need)} {where} ({ranks} rank(s) x "
                                        f"{human_bytes(bytes_per_rank)}), but only {human_bytes(device.free_bytes)} "
                                        f"is free", hint=hint)
        cap = placement.memory_fraction * device.total_bytes if (
            placement.memory_fraction_enforced and device.total_bytes) else None
        if cap is not None and bytes_per_rank > cap:
            raise UsageError(reference, f"{what} needs about {human_bytes(bytes_per_rank)} per rank, more than each "
                                        f"rank's cap {where}: {human_bytes(int(cap))} ({placement.memory_fraction} of "
                                        f"{human_bytes(device.total_bytes)})", hint=hint)
