"""Who watches a run: a terminal (rich Console) to announce it and show live ranks, or nobody (QUIET). Every kind's
``run(config, observer)`` takes one; it lives at the bottom of the imports so that any layer can name it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Observer:
    console: Any = None
    live: bool = True


QUIET = Observer()
