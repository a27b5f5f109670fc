"""Key paths of a ddplab JSON document: what the golden test compares across the redesign (issue 11).

Lists are unioned over their elements (``rows[]``); objects whose keys are data rather than names (ranks,
device indices, environment variables) become ``{}``. Values are not compared, only which keys exist.
"""

from __future__ import annotations

# Objects whose keys are data, by the name of the key that holds them.
MAP_KEYS = {"env", "environ", "plugins", "plugin_errors", "backends_available", "latencies", "stacks",
            "snapshot", "operations", "device_used_bytes", "device_util_pct", "worker_env", "flight_records",
            "summary_by_rank", "per_rank"}


def key_paths(value, prefix: str = "", parent_key: str = "") -> set[str]:
    if isinstance(value, dict):
        if parent_key in MAP_KEYS or (value and all(str(k).lstrip("-").isdigit() for k in value)):
            inner = set()
            for v in value.values():
                inner |= key_paths(v, f"{prefix}{{}}", parent_key="")
            return inner or {f"{prefix}{{}}"}
        out = set()
        for k, v in value.items():
            out |= key_paths(v, f"{prefix}.{k}" if prefix else k, parent_key=k)
        return out or {prefix}
    if isinstance(value, list):
        inner = set()
        for v in value:
            inner |= key_paths(v, f"{prefix}[]", parent_key=parent_key)
        return inner or {f"{prefix}[]"}
    return {prefix}
