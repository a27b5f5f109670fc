"""Options shared by the commands that start ranks, defined once (pip's cmdoptions)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Mapping

from ..cluster import launchers
from ..config import ENGINES, RDZV_HOST_CHOICES, LaunchOptions


def add_launch_arguments(parser: argparse.ArgumentParser, nproc_default: int = 2, timeout_default: float = 120.0,
                         timeout_help: str = "process-group timeout in seconds",
                         hang_timeout_help: str = "declare a hang when no rank progresses this many seconds "
                                                  "(default: off)") -> None:
    """Options every multi-rank command shares (a command whose timeouts mean more says so in the helps)."""
    # --nproc and --nnodes default to None here: under torchrun, srun or mpirun "not given" means "as the
    # launcher says" (launch_options); otherwise nproc_default and 1.
    parser.add_argument("--nproc", type=int, default=None,
                        help=f"ranks on this node (default: {nproc_default}; under torchrun: its ranks on this node)")
    parser.set_defaults(nproc_default=nproc_default)
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
    parser.add_argument("--timeout", type=float, default=timeout_default, dest="timeout_s",
                        help=f"{timeout_help} (default: %(default)s)")
    parser.add_argument("--run-dir", default=None, help="directory for logs and results (default: ./ddplab-runs/ID)")
    parser.add_argument("--json", metavar="PATH", help="write the JSON report here")
    parser.add_argument("--nnodes", type=int, default=None,
                        help="machines in the job, each running this command (default: 1, or the nodes srun or "
                             "mpirun started it on)")
    parser.add_argument("--rdzv-endpoint", default=None,
                        help="HOST:PORT of the c10d rendezvous, the same on every machine (default: local; under "
                             f"srun: the first node, port {launchers.DEFAULT_PORT})")
    parser.add_argument("--rdzv-id", default=None,
                        help="several machines: the job's name, the same on every machine (default: from the "
                             "endpoint); a new one for every job on the same endpoint")
    parser.add_argument("--rdzv-host", default=None, metavar="|".join(RDZV_HOST_CHOICES),
                        help="several machines: host the rendezvous store on this one? auto: when the endpoint is "
                             "one of its interface addresses (default: auto; under srun: yes on node 0)")
    parser.add_argument("--hang-timeout", type=float, default=None, dest="hang_timeout_s", help=hang_timeout_help)
    daemon = parser.add_mutually_exclusive_group()
    daemon.add_argument("--mps", dest="sharing_daemon", action="store_const", const="on",
                        help="insist on the device-sharing daemon (MPS): use a running one, else start a private "
                             "one and stop it afterwards; exit 3 where none can be used")
    daemon.add_argument("--no-mps", dest="sharing_daemon", action="store_const", const="off",
                        help="never use the sharing daemon (ranks sharing a device time-slice it)")
    parser.set_defaults(sharing_daemon="auto")


def add_engine_argument(parser: argparse.ArgumentParser) -> None:
    """--engine for the benchmarks that can time the collective library alone (storm, sweep)."""
    parser.add_argument("--engine", default="torch", metavar="|".join(ENGINES),
                        help="torch: through torch.distributed (the report's method); library: the collective library "
                             "called directly through the vendor's binding on the same buffers (`ddplab env` says "
                             "whether it is installed, and how to install it); both: side by side, with what torch "
                             "adds per call (default: %(default)s)")


def launch_options(args, environ: Mapping[str, str] = os.environ) -> LaunchOptions:
    """The command line's launch options, completed from the launcher that started ddplab (torchrun, srun,
    mpirun: cluster/launchers.py), or refused (exit 2) when that launcher makes the run wrong."""
    where = launchers.resolve(launchers.detect(environ), launchers.Asked(
        nproc=args.nproc, nnodes=args.nnodes, rdzv_endpoint=args.rdzv_endpoint, rdzv_host=args.rdzv_host))
    if where.taken or where.notes:
        print("ddplab: " + "; ".join((*where.taken, *where.notes)), file=sys.stderr)
    nproc = where.nproc if where.nproc is not None else args.nproc_default
    return LaunchOptions(nproc=nproc, placement=args.placement,
                         backend=args.backend, device=args.device, memory_fraction=args.memory_fraction,
                         reserve=args.reserve, timeout_s=args.timeout_s, run_dir=args.run_dir,
                         sharing_daemon=args.sharing_daemon, hang_timeout_s=args.hang_timeout_s, nnodes=where.nnodes,
                         rdzv_endpoint=where.rdzv_endpoint, rdzv_id=args.rdzv_id, rdzv_host=where.rdzv_host,
                         started_by=where.started_by)


def writes_the_report(config, environ: Mapping[str, str] = os.environ) -> bool:
    """Under torchrun every rank runs the command; global rank 0 writes the report and shows it."""
    launch = getattr(config, "launch", None)
    return launch is None or launch.started_by is None or environ.get("RANK", "0") == "0"


def run_measurement(measurement, config, render, args, console) -> int:
    """What a measurement command does once its Config is built: run it, report, render, exit code."""
    from .. import display, measurements
    from ..session import Observer

    record = measurement.run(config, Observer(console if writes_the_report(config) else None))
    report = measurements.report(measurement, config, record)
    if not writes_the_report(config):
        return report.verdict.exit_code
    return display.finish(report, render, args.json, console)
