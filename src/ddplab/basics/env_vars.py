"""Variables set in this process for a while: elastic hands the launcher's environment to the ranks it
starts, so a variable set around the start reaches them, and the launcher's own is restored afterwards."""

from __future__ import annotations

import contextlib
import os
from typing import Iterator, Mapping


@contextlib.contextmanager
def environ_set(values: Mapping[str, str]) -> Iterator[None]:
    """Set ``values`` in os.environ; put back what was there (or nothing) on the way out."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
