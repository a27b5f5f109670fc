"""`ddplab env`: the doctor. What this machine is, what will work on it, and why.

Reports platform and versions (the collective library BUILT into torch and the one
LOADED), devices and free memory, available backends, the shared-device plan for
two ranks, where a one-machine run listens, the sharing daemon (MPS), the vendor's
watchdog knobs, a whitelisted environment (secrets redacted), orphaned ranks (a launcher
marked them and it is provably gone) and, apart from them, the other processes on the device.
"""

from __future__ import annotations

import argparse

from rich.markup import escape

from .. import display, report
from ..errors import DdplabError

SUMMARY = "describe this machine: devices, backends, library versions, knobs, orphans"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="auto", help="device type to describe (default: detected)")
    parser.add_argument("--json", metavar="PATH", help="write the JSON report here")


def validate(args) -> None:
    from ..platform import validate_device_request

    validate_device_request(args.device)


def execute(device: str = "auto") -> dict:
    from ..config import LaunchOptions
    from ..exposure import where_to_listen
    from ..launch import Rendezvous
    from ..platform import describe, gather_probe, open_monitor
    from ..policy import plan
    from ..procs import survey

    probe = gather_probe(with_memory=True)
    platform = describe(probe, device)
    results: dict = {"plugin_errors": probe.plugin_errors}
    verdicts = ["pass" if platform.backend_available else "fail"]

    # Would the report's experiment work here? Plan it without starting anything.
    for key, placement in (("shared_device", "shared"), ("per_device", "per-device")):
        nproc = 2
        if placement == "per-device" and platform.device_count < 2:
            results[key] = {"nproc": nproc, "will_work": False,
                            "reason": f"needs 2 devices; this machine has {platform.device_count}"}
            continue
        try:
            p = plan(LaunchOptions(nproc=nproc, placement=placement), platform)
            will_work = p.expected_failure is None
            results[key] = {"nproc": nproc, "will_work": will_work, "backend": p.backend,
                            "reason": p.backend_reason, "env": p.env, "warnings": list(p.warnings),
                            "memory_fraction": p.memory_fraction, "sharing_daemon": p.sharing_daemon,
                            "considered": p.to_dict()["considered"]}
            if p.warnings:
                verdicts.append("warn")
        except DdplabError as exc:
            results[key] = {"nproc": nproc, "will_work": False, "reason": exc.message}
            verdicts.append("warn")

    # Where `ddplab train` and friends would listen on this machine (nothing is started here).
    results["listen"] = where_to_listen(1, Rendezvous.endpoint, platform.device_type).to_dict()

    monitor = open_monitor(platform.spec)
    try:
        found = survey(monitor, platform.spec.device_node_globs)
    finally:
        monitor.close()
    results.update(found.to_dict())
    if found.orphans:  # other processes on the device are someone's work, not a warning
        verdicts.append("warn")
    return report.document("env", {"device": device}, platform.to_dict(), results, report.worst(verdicts))


def render(doc: dict, console) -> None:
    from .clean import render_other_processes

    p, r = doc["platform"], doc["results"]
    plugin = f"{p['plugin_module']} {p['plugin_version'] or '(not installed)'}" if p["plugin_module"] else "none needed"
    lib = p["collective_library"]
    console.print(display.kv_table("Platform", [
        ("device type", f"{p['device_type']} ({p['vendor']})"),
        ("torch", p["torch_version"]),
        ("vendor plug-in", plugin),
        ("backend", f"{p['backend']} ({'available' if p['backend_available'] else 'NOT available'}); "
                    f"torch's default map says {p['torch_default_backend']}"),
        (f"{lib} built into torch", p["collective_built_version"]),
        (f"{lib} loaded (calls bind here)", _bound_text(p)),
        *_copies_rows(p, lib),
        ("driver", p["driver_version"]),
        ("management tool", f"{p['management_tool']} -> {p['management_tool_path'] or 'not on PATH'}"
         if p["management_tool"] else None),
        ("sharing daemon", _daemon_text(p)),
        ("per-process memory", p["per_process_memory_api"] or "no vendor API (allocator and RSS only)"),
        ("backends available", ", ".join(b for b, ok in p["backends_available"].items() if ok)),
        ("host", f"{p['hostname']}, Python {p['python_version']}"),
    ]))
    dev_rows = [(f"{d['index']}: {d['name']}",
                 f"{report.human_bytes(d['free_bytes'])} free of {report.human_bytes(d['total_bytes'])}")
                for d in p["devices"]]
    console.print(display.kv_table(f"Devices ({p['device_count']})", dev_rows))
    plan_rows = []
    for key in ("shared_device", "per_device"):
        s = r[key]
        label = "2 ranks, one device" if key == "shared_device" else "2 ranks, one per device"
        text = (f"{'works' if s['will_work'] else 'will NOT work'}"
                + (f" with {s['backend']}" if s.get("backend") else "") + f": {s['reason']}")
        text = escape(text)
        for w in s.get("warnings", []):
            text += f"\n[yellow]warning:[/] {escape(w)}"
        text += _considered_text(s.get("considered", []))
        plan_rows.append((label, text))
    console.print(display.kv_table("Pseudo-DDP plan", plan_rows, markup=True))
    console.print(f"where a one-machine run listens: {escape(r['listen']['summary'])}")
    if p["knobs"]:
        console.print(display.kv_table("Watchdog knobs (effective)", [
            (k["name"], f"{k['effective']} ({k['source']}) - {k['meaning']}") for k in p["knobs"]]))
    if p["environ"]:
        console.print(display.kv_table("Environment (whitelisted)", list(p["environ"].items())))
    if r["orphans"]:
        console.print(display.kv_table("Orphaned processes", [
            (str(o["pid"]), f"{o['reason']}; {report.human_bytes(o['device_mem_bytes'])}; age {o['age_s']}s; "
                            f"{o['cmdline']}") for o in r["orphans"]]))
    else:
        console.print("orphaned processes: none")
    render_other_processes(r.get("other_processes", []), console)
    for mod, err in r["plugin_errors"].items():
        console.print(f"[red]plug-in {mod} failed to import:[/] {err}")
    console.print(f"verdict: {display.verdict_text(doc['verdict'])}")


def _considered_text(options: list[dict]) -> str:
    """Every setup the policy weighed, when there was a choice: chosen or rejected, and why."""
    if len(options) < 2:
        return ""
    return "".join(f"\n{'[green]chosen[/]  ' if o['chosen'] else 'rejected'} {escape(o['setup'])}"
                   + ("" if o["chosen"] else f": {escape(o['why'])}") for o in options)


def _bound_text(p: dict) -> str | None:
    copies = p.get("collective_loaded_copies") or []
    bound = next((c for c in copies if c["bound_via"]), None)
    if bound is not None:
        return f"{bound['version']} ({bound['path']}) [{bound['bound_via']}]"
    if copies:
        return "mapped, but which copy calls bind to could not be told"
    return f"{p['collective_loaded_version']} ({p['collective_loaded_path']})" if p["collective_loaded_path"] else None


def _daemon_text(p: dict) -> str | None:
    if not p["sharing_daemon"]:
        return None
    state = "running (ddplab uses it and leaves it alone)" if p["sharing_daemon_running"] else "not running"
    control = p.get("sharing_daemon_control_path")
    start = (f"ddplab can start a private one ({control})" if control
             else "ddplab cannot start one (its control binary is not on PATH)")
    return f"{p['sharing_daemon']}: {state}; {start}"


def _copies_rows(p: dict, lib: str) -> list[tuple[str, str]]:
    """A row only when several copies are mapped: then which one calls bind to matters."""
    copies = p.get("collective_loaded_copies", [])
    if len(copies) < 2:
        return []
    return [(f"{lib} copies mapped", "\n".join(
        f"{c['version'] or 'version unknown'} {c['path']}: {'BOUND' if c['bound_via'] else 'mapped, not bound'}"
        for c in copies))]


def main(args, console) -> int:
    return display.finish(execute(args.device), render, args.json, console)
