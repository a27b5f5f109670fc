"""The verdict table: one row per check, with the number, the threshold, what it means and
what to do next. Built from the stages' JSON documents alone, so `ddplab report` can
rebuild it from report.json.
"""

from __future__ import annotations

from .records import Check, Verdict


def did_not_complete(session, command: str) -> list[Check]:
    """The one row of a measurement whose ranks did not all finish (its own rows would judge nothing)."""
    if session.completed:
        return []
    return [Check(f"{command} completed", Verdict.FAIL, session.failure_reason(), "completes",
                  "the ranks did not finish", "read the rank errors in the run directory")]


def setup_warnings(session) -> list[Check]:
    """A WARN row for what the placement policy warned about (e.g. ranks time-slicing a device)."""
    if not session.warnings:
        return []
    return [Check("setup warnings", Verdict.WARN, "; ".join(session.warnings), "none",
                  "the run worked, but not in the setup this machine does best", "see the warning")]


def row(stage: str, check: str, verdict: str, value: str, threshold: str, meaning: str, next_step: str) -> dict:
    return {"stage": stage, "check": check, "verdict": verdict, "value": value, "threshold": threshold,
            "meaning": meaning, "next_step": next_step}


def for_stage(stage: dict) -> list[dict]:
    doc = stage.get("report")
    name = stage["name"]
    if name == "leftovers":
        return [row(name, "nothing left running", stage["verdict"], stage["summary"], "0 processes",
                    "every process the lab's stages started is gone (orphans of other runs are shown, not counted)",
                    "none" if stage["verdict"] == "pass" else "`ddplab clean` lists them; report the stage that "
                                                              "left them")]
    if doc is None:
        return [row(name, "stage ran", stage["verdict"], stage.get("summary", ""), "completes", "the stage could "
                    "not run here", "see the stage's error; `ddplab env` shows what this machine lacks")]
    builder = _BUILDERS.get(doc["command"])
    if builder is None:
        return []
    results = doc["results"]
    if "completed" in results and not results["completed"]:  # one row for any stage whose ranks did not finish
        return [row(name, f"{doc['command']} completed", "fail", _failure(results), "completes",
                    "the stage's ranks did not finish", "read the rank errors in the stage's run directory")]
    return builder(name, doc)


def _env(name, doc):
    p, r = doc["platform"], doc["results"]
    rows = [row(name, "collective backend available", "pass" if p["backend_available"] else "fail",
                f"{p['backend']} ({p['collective_library']} loaded {p['collective_loaded_version'] or 'n/a'})",
                "available", "ranks can form a process group on this device",
                "install the vendor's torch build or plug-in" if not p["backend_available"] else "none")]
    orphans = len(r["orphans"])
    rows.append(row(name, "orphaned processes", "warn" if orphans else "pass", str(orphans), "0",
                    "ranks a launcher marked whose launcher is provably gone: they hold what the next job needs",
                    "`ddplab clean` lists them, `ddplab clean --yes` ends exactly those" if orphans else "none"))
    others = r.get("other_processes") or []
    if others:  # someone's work, not a fault: shown, never a warning by itself
        rows.append(row(name, "other processes on the device", "pass", f"{len(others)}: " + ", ".join(
            f"{o['pid']} {o['program'] or '?'}" for o in others[:5]), "informational",
            "they share the device (memory, time slices) but are not orphans", "none; `ddplab clean --pid N --yes` "
            "ends one you name"))
    return rows


def _train(name, doc):
    r = doc["results"]
    st = r["step_time_us"]
    return [
        row(name, "gradients synchronised", "pass" if r["grad_matches_reference"] and r["params_identical"]
            else "fail", f"params identical={r['params_identical']}, grad = reference={r['grad_matches_reference']}",
            "both true", f"{r['world_size']} ranks on {r['backend']} train as one model",
            "none" if r["grad_matches_reference"] else "the backend corrupts or skips gradient all_reduce: "
                                                        "report it with this JSON"),
        row(name, "step time", "pass", f"p50 {st['p50']:.0f} us, p99 {st['p99']:.0f} us", "informational",
            r["step_time_method"], "compare with last week's report (`ddplab compare`)"),
    ]


def _storm(name, doc):
    r = doc["results"]
    ok = r["within_threshold"]
    return [row(name, "mean all_reduce latency", "pass" if ok else "fail", f"{r['mean_us']:.1f} us "
                f"(p99 {r['per_op_us']['p99']:.0f} us)", f"<= {r['threshold_us']:.0f} us",
                r["threshold_reason"],
                "none" if ok else "too slow for this setup: check the sharing daemon (MPS), the backend choice, "
                                  "and the driver's launch overhead")]


def _sweep(name, doc):
    r = doc["results"]
    wrong = r["num_wrong_total"]
    rows = [row(name, "collective results correct", "pass" if not wrong and not r["errors"] else "fail",
                f"#wrong {wrong}, errors {len(r['errors'])}", "0", "every size of every collective gave exact data",
                "none" if not wrong else "data corruption: report the rows with #wrong > 0")]
    timed = [x for x in r["rows"] if x.get("busbw_gbps") is not None]
    if timed:
        best = max(timed, key=lambda x: x["busbw_gbps"])
        text = f"{best['busbw_gbps']:.1f} GB/s ({best['op']}, {best['size_bytes']} B)"
        if r.get("ceiling"):
            text += f" = {100 * best['busbw_gbps'] / r['ceiling']['gbps']:.2f}% of the copy ceiling"
        rows.append(row(name, "peak bus bandwidth", "pass", text, "informational (--min-busbw to gate)",
                        "nccl-tests' busbw definition, GB = 1e9", "compare with nccl-tests: `ddplab compare`"))
    if "spikes" in r:  # reports written before spikes were looked for have no such row
        rows.append(_sweep_spikes(name, r))
    return rows


def _sweep_spikes(name, r):
    from .spikes import FINDING, judge

    found = r["spikes"]
    value = "; ".join(f"{x['op']} {x['size_bytes']} B {'in' if x['in_place'] else 'out'}-place "
                      f"{x['time_us']:.1f} us = {x['factor']:.1f}x its neighbours" for x in found) or "none"
    verdict = judge(found, bool((r.get("placement") or {}).get("host_only")))
    return row(name, "no size far off its neighbours", verdict, value, r["spike_rule"],
               f"{FINDING}; each size is the median of {r.get('repeat', 1)} repetition(s)",
               "none" if not found else "measure again with more repetitions (-R) and look at the spread in the "
                                        "JSON; `--no-sample` or `--sample-while-timing` tell whether the launcher's "
                                        "sampler is the cause")


def _ceiling(name, doc):
    r = doc["results"]
    d = r["device_copy"]
    return [row(name, "device copy bandwidth", "pass", f"{d['gbps']:.0f} GB/s ({d['rw_gbps']:.0f} GB/s read+write)",
                "informational", "the loopback ceiling: shared-device busbw cannot exceed it",
                "far below the datasheet's memory bandwidth: the copy path is broken")]


def _contention(name, doc):
    from .workloads.contention import judge

    r = doc["results"]
    verdict, threshold, note = judge(r)
    value = "n/a" if r.get("efficiency") is None else f"{100 * r['efficiency']:.1f}%"
    basis = f"the ideal aggregate of {r['usable_cores']} usable cores" if r.get("ideal_basis") == "cores" \
        else "one process alone"
    return [row(name, "aggregate efficiency", verdict, value, threshold,
                f"{r['world_size']} processes computing together vs {basis}", note)]


def _drill(name, doc):
    rows = []
    for d in doc["results"]["drills"]:
        value = f"detected by {d.get('detected_by')} in {d.get('detect_s')} s; culprit {d.get('culprit_ranks')}; " \
                f"leaked {len(d.get('leaked_pids') or [])}"
        rows.append(row(name, f"drill {d['drill']}", d["verdict"], value, d.get("expect", ""),
                        "the stack reacted to the fault as it must",
                        "none" if d["verdict"] == "pass" else "see the drill's error excerpt and run directory"))
    return rows


def _failure(r: dict) -> str:
    from .display import failure_reason

    return failure_reason(r)


_BUILDERS = {"env": _env, "train": _train, "storm": _storm, "sweep": _sweep, "ceiling": _ceiling,
             "contention": _contention, "drill": _drill}
