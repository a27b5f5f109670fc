"""Collectives a sweep can time: one file per collective, this registry in help order.

Each module defines ``SPEC``, a ``common.Collective``: its byte counts and bus factor
(nccl-tests' definitions, docs/metrics.md), which placements
torch.distributed offers (in-place, out-of-place), and how to fill, run and check it.
"""

from __future__ import annotations

import importlib

from ..errors import invalid_choice

COLLECTIVES: dict[str, str] = {
    "all_reduce": "ddplab.collectives.all_reduce",
    "all_gather": "ddplab.collectives.all_gather",
    "reduce_scatter": "ddplab.collectives.reduce_scatter",
    "broadcast": "ddplab.collectives.broadcast",
    "reduce": "ddplab.collectives.reduce",
    "all_to_all": "ddplab.collectives.all_to_all",
    "send_recv": "ddplab.collectives.send_recv",
}


def get(name: str):
    key = name.replace("-", "_")
    if key not in COLLECTIVES:
        raise invalid_choice("collective", name, COLLECTIVES)
    return importlib.import_module(COLLECTIVES[key]).SPEC


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
