"""A small tmpfs for disk-full tests (root only; skipped, with the reason, where mount is refused)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest


@pytest.fixture
def small_disk(tmp_path):
    """A 200 KiB tmpfs mounted inside tmp_path, unmounted afterwards whatever happened."""
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(mount_point)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {proc.stderr.strip() or proc.returncode}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def fill(directory: Path, leave_bytes: int = 0) -> None:
    """Fill the filesystem of ``directory`` until about ``leave_bytes`` are free."""
    stat = os.statvfs(directory)
    free = stat.f_bavail * stat.f_frsize
    with open(directory / "filler", "wb") as f:
        try:
            f.write(b"\0" * max(0, free - leave_bytes))
            f.flush()
        except OSError:
            pass


def temporaries(directory: Path) -> list[str]:
    """Files an atomic writer would have left behind."""
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))
