"""The doctor, and the lab's first stage: what this machine is, what will work on it, and why.

The platform and versions (the collective library BUILT into torch and the one LOADED), devices and free memory,
backends, the placement plan for two ranks on one device and one per device (nothing is started), where a run
listens, the sharing daemon, the watchdog knobs, a whitelisted environment, orphaned ranks and the other processes
on the device, and whether the library engine can run here.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..basics.cli_options import argv_of, option
from ..records.config import DEVICES, LaunchOptions
from ..errors import DdplabError
from ..records import Check, Verdict
from ..records.clean import Survey
from ..records.env import ConsideredSetup, EnvRecord, PlannedSetup, TwoRankPlan
from ..basics.observer import QUIET, Observer

NAME = "env"
SUMMARY = "describe this machine: devices, backends, library versions, knobs, orphans"


@dataclass(frozen=True, kw_only=True)
class EnvConfig:
    """The doctor: describe this machine."""

    device: str = option("--device", default="auto", choices=DEVICES)
    """Device type to describe, or auto for the detected accelerator (cpu when none)."""

    to_argv = argv_of  # the command line that gives this config back


Config, Record = EnvConfig, EnvRecord

PLAN_RANKS = 2  # the report's experiment: two ranks
PLACEMENTS = {"shared_device": ("shared", "2 ranks, one device"),
              "per_device": ("per-device", "2 ranks, one per device")}


def run(config: EnvConfig, observer: Observer = QUIET) -> EnvRecord:
    """Probe the machine and plan, without starting anything; EnvironmentUnsupported for a device it lacks."""
    from ..cluster.exposure import Rendezvous, where_to_listen
    from ..platform import describe, gather_probe
    from ..platform.library_binding import binding_status

    probe = gather_probe(with_memory=True)
    platform = describe(probe, config.device)
    exposure = where_to_listen(1, Rendezvous.endpoint, platform.device_type)
    return EnvRecord(
        plugin_errors=dict(probe.plugin_errors),
        shared_device=plan_two_ranks(platform, "shared"),
        per_device=plan_two_ranks(platform, "per-device"),
        listen=exposure.record(),
        survey=survey_device(platform),
        library_binding=binding_status(platform),
        platform=platform,
    )


def plan_two_ranks(platform, placement: str) -> TwoRankPlan:
    """Would two ranks work here in ``placement``: the policy's plan, its refusal, or why the machine cannot."""
    from ..job.policy import plan

    if placement == "per-device" and platform.device_count < PLAN_RANKS:
        return TwoRankPlan(PLAN_RANKS, False, f"needs {PLAN_RANKS} devices; this machine has "
                                              f"{platform.device_count}")
    try:
        p = plan(LaunchOptions(nproc=PLAN_RANKS, placement=placement), platform)
    except DdplabError as exc:
        return TwoRankPlan(PLAN_RANKS, False, exc.message, error=exc.reference)
    return TwoRankPlan(PLAN_RANKS, p.expected_failure is None, p.backend_reason,
                       planned=PlannedSetup(backend=p.backend, env=dict(p.env), warnings=list(p.warnings),
                                            memory_fraction=p.memory_fraction, sharing_daemon=p.sharing_daemon,
                                            considered=[ConsideredSetup(**vars(o)) for o in p.considered]))


def survey_device(platform) -> Survey:
    """Orphans and the other processes on the device (supervision/procs.py's rules)."""
    from ..platform import open_monitor
    from ..supervision.procs import survey

    monitor = open_monitor(platform.spec)
    try:
        return survey(monitor, platform.spec.device_node_globs)
    finally:
        monitor.close()


def checks(record: EnvRecord) -> list[Check]:
    platform = record.platform
    return [
        *([backend_check(platform)] if platform is not None else []),
        *(plan_check(key, getattr(record, key)) for key in PLACEMENTS),
        *record.survey.checks(),
    ]


def backend_check(platform) -> Check:
    ok = platform.backend_available
    loaded = platform.collective_loaded_version
    return Check("collective backend available", Verdict.PASS if ok else Verdict.FAIL,
                 f"{platform.backend} ({platform.collective_library} {loaded} loaded)" if loaded else
                 f"{platform.backend} ({platform.collective_library}, no loaded version to read)", "available",
                 "ranks can form a process group on this device",
                 "none" if ok else "install the vendor's torch build or plug-in")


def plan_check(key: str, plan: TwoRankPlan) -> Check:
    """A plan the policy refused, or made with warnings, is a warning: the lab's stages would run in it. A
    machine without the devices for a placement has nothing to judge: SKIP, with why."""
    _, label = PLACEMENTS[key]
    if not plan.applicable:
        return Check(label, Verdict.SKIP, plan.reason, "informational", "this machine cannot have this placement, so "
                     "nothing was planned for it", "none")
    problems = ([f"refused: {plan.reason}"] if plan.error else []) + plan.warnings
    works = f"works with {plan.planned.backend}" if plan.will_work and plan.planned else "will NOT work"
    return Check(label, Verdict.WARN if problems else Verdict.PASS,
                 "; ".join(problems) if problems else f"{works}: {plan.reason}", "no warnings",
                 "the placement policy's plan for the report's experiment (nothing was started)",
                 "see `ddplab env` for every setup weighed, and docs/shared-device.md" if problems else "none")


def summary(record: EnvRecord) -> str:
    p = record.platform
    if p is None:  # read back from JSON: the platform is the report's
        return f"orphans {len(record.survey.orphans)}"
    return f"{p.device_type} ({p.vendor}), {p.device_count} device(s), torch {p.torch_version}"
