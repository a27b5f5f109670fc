"""Slurm's compressed lists, expanded: host lists (``node[01-03,07]``, ``r[1-2]-n[1-2]``) and tasks per node
(``2(x3),1``), as srun and sbatch set them in SLURM_JOB_NODELIST and SLURM_TASKS_PER_NODE.
"""

from __future__ import annotations

import re

MAX_HOSTS = 65_536  # a host list longer than this is refused rather than expanded
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
_REPEAT = re.compile(r"^(\d+)(?:\(x(\d+)\))?$")


def expand_hostlist(text: str) -> list[str]:
    """``node[01-03,07],gpu5`` -> node01, node02, node03, node07, gpu5 (zero padding kept); several bracket groups
    in one name expand as a product."""
    hosts: list[str] = []
    for item in _split_top_level(text.strip()):
        hosts.extend(_expand_item(item))
        if len(hosts) > MAX_HOSTS:
            raise ValueError(f"more than {MAX_HOSTS} hosts")
    return hosts


def _split_top_level(text: str) -> list[str]:
    items, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "[":
            depth += 1
            if depth > 1:
                raise ValueError("nested '['")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise ValueError("']' without '['")
        elif char == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth:
        raise ValueError("'[' without ']'")
    items.append(text[start:])
    if any(not item for item in items):
        raise ValueError("an empty host name")
    return items


def _expand_item(item: str) -> list[str]:
    open_at = item.find("[")
    if open_at < 0:
        return [item]
    close_at = item.index("]", open_at)
    prefix, body, rest = item[:open_at], item[open_at + 1:close_at], item[close_at + 1:]
    tails = _expand_item(rest)
    return [f"{prefix}{number}{tail}" for number in _expand_ranges(body) for tail in tails]


def _expand_ranges(body: str) -> list[str]:
    numbers: list[str] = []
    for part in body.split(","):
        match = _RANGE.match(part.strip())
        if not match:
            raise ValueError(f"{part!r} is not N or N-M")
        low, high = match.group(1), match.group(2) or match.group(1)
        if int(high) < int(low):
            raise ValueError(f"{part!r} runs backwards")
        if int(high) - int(low) >= MAX_HOSTS:
            raise ValueError(f"more than {MAX_HOSTS} hosts")
        width = len(low)
        numbers.extend(str(n).zfill(width) for n in range(int(low), int(high) + 1))
    return numbers


def expand_tasks_per_node(text: str) -> list[int]:
    """Slurm's ``2(x3),1`` -> [2, 2, 2, 1]."""
    counts: list[int] = []
    for part in text.split(","):
        match = _REPEAT.match(part.strip())
        if not match:
            raise ValueError(f"{part!r} is not N or N(xM)")
        repeat = int(match.group(2) or 1)
        if len(counts) + repeat > MAX_HOSTS:
            raise ValueError(f"more than {MAX_HOSTS} nodes")
        counts.extend([int(match.group(1))] * repeat)
    return counts
