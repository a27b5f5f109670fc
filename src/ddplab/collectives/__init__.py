"""Collectives a sweep can time: one file per collective, this registry in help order.

Each module defines ``SPEC``, a ``common.Collective``: every fact about it in one place. ``register`` adds one
from outside ddplab (a plug-in, a test); the ranks a sweep starts afterwards inherit it through ``PLUGINS_ENV``.
"""

from __future__ import annotations

import importlib
import os

from ..errors import invalid_choice

PLUGINS_ENV = "DDPLAB_COLLECTIVES"  # "name=module,..." registered from outside; ranks inherit it

COLLECTIVES: dict[str, str] = {
    "all_reduce": "ddplab.collectives.all_reduce",
    "all_gather": "ddplab.collectives.all_gather",
    "reduce_scatter": "ddplab.collectives.reduce_scatter",
    "broadcast": "ddplab.collectives.broadcast",
    "reduce": "ddplab.collectives.reduce",
    "all_to_all": "ddplab.collectives.all_to_all",
    "send_recv": "ddplab.collectives.send_recv",
}


def _plugins() -> dict[str, str]:
    return dict(entry.split("=", 1) for entry in os.environ.get(PLUGINS_ENV, "").split(",") if "=" in entry)


COLLECTIVES.update(_plugins())


def register(name: str, module: str) -> None:
    """Add the collective ``module`` defines (its ``SPEC``) under ``name``, here and in the ranks started later."""
    COLLECTIVES[name] = module
    os.environ[PLUGINS_ENV] = ",".join(f"{k}={v}" for k, v in {**_plugins(), name: module}.items())


def get(name: str):
    key = name.replace("-", "_")
    if key not in COLLECTIVES:
        raise invalid_choice("collective", name, COLLECTIVES)
    return importlib.import_module(COLLECTIVES[key]).SPEC


def specs() -> list:
    """Every registered collective's spec, in help order."""
    return [get(name) for name in COLLECTIVES]


def parse_ops(text: str) -> list[str]:
    """"all" or a comma list; each name validated (kebab-case accepted)."""
    if text.strip() == "all":
        return list(COLLECTIVES)
    names = [t.strip().replace("-", "_") for t in text.split(",") if t.strip()]
    if not names:
        raise invalid_choice("collective", text, COLLECTIVES)
    for n in names:
        get(n)
    return names
