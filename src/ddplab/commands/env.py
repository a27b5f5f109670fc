"""Describe this machine and what will work on it: the devices, torch and the collective library (the
version built in and the one actually loaded), free memory, the backends, how two ranks would share one device
and why, where a run listens, the watchdog settings, a whitelisted environment with secrets withheld, and any
orphaned ranks left by earlier jobs.
"""

from __future__ import annotations

from rich.markup import escape

from ..report import terminal
from ..measurements import env
from ..records import Report
from ..records.env import ConsideredSetup, TwoRankPlan
from ..basics.sizes import human_bytes
from . import options

SUMMARY = env.SUMMARY
EXAMPLES = (  # shown by --help (commands.help_epilog)
    ("ddplab env", "describe this machine"),
    ("ddplab env --json env.json", "the same, as a JSON report to attach to a bug report"),
)


def render(report: Report, console) -> None:
    from .clean import render_other_processes

    p, r = report.platform, report.results
    plugin = f"{p.plugin_module} {p.plugin_version or '(not installed)'}" if p.plugin_module else "none needed"
    lib = p.collective_library
    console.print(terminal.kv_table("Platform", [
        ("device type", f"{p.device_type} ({p.vendor})"),
        ("torch", p.torch_version),
        ("vendor plug-in", plugin),
        ("backend", f"{p.backend} ({'available' if p.backend_available else 'NOT available'}); "
                    f"torch's default map says {p.torch_default_backend}"),
        (f"{lib} built into torch", p.collective_built_version),
        (f"{lib} loaded (calls bind here)", _bound_text(p)),
        *_copies_rows(p, lib),
        ("driver", p.driver_version),
        ("management tool", f"{p.management_tool} -> {p.management_tool_path or 'not on PATH'}"
         if p.management_tool else None),
        ("sharing daemon", _daemon_text(p)),
        ("per-process memory", p.per_process_memory_api or "no vendor API (allocator and RSS only)"),
        ("backends available", ", ".join(b for b, ok in p.backends_available.items() if ok)),
        ("library binding", r.library_binding.describe() if r.library_binding else None),
        ("host", f"{p.hostname}, Python {p.python_version}"),
    ]))
    dev_rows = [(f"{d.index}: {d.name}", f"{human_bytes(d.free_bytes)} free of {human_bytes(d.total_bytes)}")
                for d in p.devices]
    console.print(terminal.kv_table(f"Devices ({p.device_count})", dev_rows))
    plan_rows = [(label, _plan_text(getattr(r, key))) for key, (_, label) in env.PLACEMENTS.items()]
    console.print(terminal.kv_table("Pseudo-DDP plan", plan_rows, markup=True))
    if r.listen is not None:
        console.print(f"where a one-machine run listens: {escape(r.listen.summary)}")
    if p.knobs:
        console.print(terminal.kv_table("Watchdog knobs (effective)", [
            (k.name, f"{k.effective} ({k.source}) - {k.meaning}") for k in p.knobs]))
    if p.environ:
        console.print(terminal.kv_table("Environment (whitelisted)", list(p.environ.items())))
    orphans = r.survey.orphans
    if orphans:
        console.print(terminal.kv_table("Orphaned processes", [
            (str(o.pid), f"{o.reason}; {human_bytes(o.device_mem_bytes)}; age {o.age_s}s; {o.cmdline}")
            for o in orphans]))
    else:
        console.print("orphaned processes: none")
    render_other_processes(r.survey.other_processes, console)
    for mod, err in r.plugin_errors.items():
        console.print(f"[red]plug-in {escape(mod)} failed to import:[/] {escape(err)}")
    console.print(f"verdict: {terminal.verdict_text(report.verdict)}")


def _plan_text(plan: TwoRankPlan) -> str:
    """Works or not, with which backend and why; then the policy's warnings and every setup it weighed."""
    backend = f" with {plan.planned.backend}" if plan.planned else ""
    text = escape(f"{'works' if plan.will_work else 'will NOT work'}{backend}: {plan.reason}")
    for w in plan.warnings:
        text += f"\n[yellow]warning:[/] {escape(w)}"
    return text + _considered_text(plan.planned.considered if plan.planned else [])


def _considered_text(options: list[ConsideredSetup]) -> str:
    """Every setup the policy weighed, when there was a choice: chosen or rejected, and why."""
    if len(options) < 2:
        return ""
    return "".join(f"\n{'[green]chosen[/]  ' if o.chosen else 'rejected'} {escape(o.setup)}"
                   + ("" if o.chosen else f": {escape(o.why)}") for o in options)


def _bound_text(p) -> str | None:
    copies = p.collective_loaded_copies
    bound = next((c for c in copies if c.bound_via), None)
    if bound is not None:
        return f"{bound.version} ({bound.path}) [{bound.bound_via}]"
    if copies:
        return "mapped, but which copy calls bind to could not be told"
    return f"{p.collective_loaded_version} ({p.collective_loaded_path})" if p.collective_loaded_path else None


def _daemon_text(p) -> str | None:
    if not p.sharing_daemon:
        return None
    state = "running (ddplab uses it and leaves it alone)" if p.sharing_daemon_running else "not running"
    control = p.sharing_daemon_control_path
    start = (f"ddplab can start a private one ({control})" if control
             else "ddplab cannot start one (its control binary is not on PATH)")
    return f"{p.sharing_daemon}: {state}; {start}"


def _copies_rows(p, lib: str) -> list[tuple[str, str]]:
    """A row only when several copies are mapped: then which one calls bind to matters."""
    copies = p.collective_loaded_copies
    if len(copies) < 2:
        return []
    return [(f"{lib} copies mapped", "\n".join(
        f"{c.version or 'version unknown'} {c.path}: {'BOUND' if c.bound_via else 'mapped, not bound'}"
        for c in copies))]


add_arguments, config_from_args, validate, main = options.measurement_command(env, render)
