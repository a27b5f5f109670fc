"""The oldest torch ddplab supports, and the refusal of an older one before anything starts.

The floor is the oldest release the torch matrix ran (scripts/torch_matrix.py); pyproject.toml declares the same
floor (a unit test compares them). An older torch is refused in one sentence, exit 3, instead of failing somewhere
inside a rank. The version is read from the package's metadata, not by importing torch: the check costs nothing,
and a torch too broken to import is still named.
"""

from __future__ import annotations

import re

from ..errors import EnvironmentUnsupported

FLOOR = (2, 4)  # (major, minor): every release of it and after is supported
FLOOR_TEXT = ".".join(map(str, FLOOR))

_RELEASE = re.compile(r"(\d+)\.(\d+)")


def installed_version() -> str | None:
    """torch's version as installed (``2.5.1+cu124``, ``2.6.0a0+ecf3bae``), or None when there is none."""
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:  # a build without metadata (from source, some images): ask torch itself
        try:
            import torch
        except ImportError:
            return None
        return str(torch.__version__)


def release(version: str) -> tuple[int, int] | None:
    """(major, minor) of a torch version string; a pre-release of 2.5 (``2.5.0a0+...``, as NVIDIA's images
    carry) counts as 2.5. None when the string names no release."""
    match = _RELEASE.match(version.strip())
    return (int(match.group(1)), int(match.group(2))) if match else None


def unsupported(version: str | None) -> str | None:
    """Why this torch cannot run ddplab, in one sentence, or None when it can."""
    if version is None:
        return f"torch is not installed here; ddplab needs torch {FLOOR_TEXT} or newer."
    found = release(version)
    if found is None:
        return f"torch {version} is installed, a version ddplab cannot read; ddplab needs torch {FLOOR_TEXT} or newer."
    if found < FLOOR:
        return f"torch {version} is installed, older than torch {FLOOR_TEXT}, the oldest ddplab supports."
    return None


def require_supported(version: str | None = None) -> None:
    """Exit 3 (``EnvironmentUnsupported``) when the installed torch (or ``version``) is older than the floor."""
    reason = unsupported(installed_version() if version is None else version)
    if reason:
        raise EnvironmentUnsupported("torch-unsupported", reason)
