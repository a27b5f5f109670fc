"""Writing result files: atomically, and with the real cause when the disk says no.

Every file a run leaves for others to read goes through ``write_text_atomic``: a temporary file in the same
directory, fsync'ed and renamed over the target, so a reader (or a user after a crash or a full disk) sees the old
file or the new one, never half of one. The secrets the process learned are withheld on the way, whoever built the
text. ``check_output_file`` / ``check_output_dir`` run before anything is launched, so that an output ddplab could
not write is refused at once rather than after the run.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sys
import uuid
from pathlib import Path

from ..errors import EnvironmentUnsupported, UsageError
from .redaction import withhold_known

# Errnos that mean "this filesystem has no room": the disk, or the user's quota on it.
_NO_SPACE = {errno.ENOSPC, errno.EDQUOT}
PROBE_BYTES = 4096  # one page: a filesystem that cannot take this cannot take a report either
STDOUT = "-"  # `--json -`: the JSON goes to standard output


class DiskFull(EnvironmentUnsupported):
    """ENOSPC (or a quota) while writing: this machine cannot store the results (exit 3)."""

    def __init__(self, path: str | Path, what: str = ""):
        super().__init__("no-space-left", f"no space left on device while writing {path}"
                                          + (f" ({what})" if what else ""),
                         hint="free space on that filesystem, or point --json/--run-dir/--out elsewhere")


def write_error(exc: OSError, path: str | Path) -> EnvironmentUnsupported:
    """The DdplabError for an OSError raised while writing ``path`` after checks passed."""
    if exc.errno in _NO_SPACE:
        return DiskFull(path)
    return EnvironmentUnsupported("cannot-write", f"cannot write {path}: {exc.strerror or exc}")


def write_text_atomic(path: str | Path, text: str, *, durable: bool = True, make_parents: bool = False) -> Path:
    """Replace ``path`` with ``text`` all at once; on any error the old file is left as it was. The secrets this
    process learned are withheld from the text. ``durable=False`` skips the fsyncs: for files rewritten many times
    a second that only a live process reads, where atomicity matters and surviving a power cut does not."""
    path = Path(path)
    text = withhold_known(text)
    tmp = _temp_name(path)
    try:
        if make_parents:
            path.parent.mkdir(parents=True, exist_ok=True)
        _write_new_file(tmp, text, durable)
        os.replace(tmp, path)
        if durable:
            _fsync_directory(path.parent)
    except OSError as exc:
        _remove_quietly(tmp)
        raise write_error(exc, path) from None
    return path


def write_json(doc: dict, path: str | Path) -> Path | None:
    """Write the document atomically into an existing directory (none is made); STDOUT ("-"): printed to standard
    output instead (None returned)."""
    text = json.dumps(doc, indent=2) + "\n"
    if str(path) == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
        return None
    return write_text_atomic(path, text)


def withhold_in_place(path: str | Path) -> bool:
    """Rewrite a text file that others wrote (elastic's logs of a job) with the secrets this process learned
    withheld, atomically; left as it is when it holds none or cannot be read or written. Whether it was rewritten."""
    path = Path(path)
    encoding = {"encoding": "utf-8", "errors": "surrogateescape", "newline": ""}  # every byte kept as it was
    try:
        with open(path, **encoding) as src:
            if all(withhold_known(line) == line for line in src):
                return False
    except OSError:
        return False
    tmp = _temp_name(path)
    try:
        with open(path, **encoding) as src, open(tmp, "x", **encoding) as dst:
            for line in src:
                dst.write(withhold_known(line))
        os.replace(tmp, path)
        return True
    except OSError:
        _remove_quietly(tmp)
        return False


def create_exclusive(path: str | Path, text: str) -> bool:
    """Create ``path`` holding ``text`` unless it exists (False then); never a half-written file. The text is
    hard-linked into place from a temporary file: the link fails if ``path`` exists, so of two racers one wins."""
    path = Path(path)
    tmp = _temp_name(path)
    try:
        _write_new_file(tmp, text, durable=True)
        os.link(tmp, path)
        _fsync_directory(path.parent)
        return True
    except FileExistsError:
        return False
    except OSError as exc:
        raise write_error(exc, path) from None
    finally:
        _remove_quietly(tmp)


def check_output_file(path: str | Path, option: str) -> None:
    """Refuse now (exit 2; exit 3 for a full disk) a file path ddplab could not write at the end. Its directory
    must exist: a typo in it is refused, never created."""
    path = Path(path)
    if path.is_dir():
        raise UsageError("output-is-a-directory", f"{option} {path} is a directory; give a file path, "
                                                  f"e.g. {path / 'report.json'}")
    if path.exists() and not path.is_file():  # a device, a pipe, a socket: the atomic rename would replace it
        raise UsageError("output-not-a-file", f"{option} {path} exists and is not a regular file; give a file "
                                              f"path, or leave {option} out")
    nearest = _nearest_existing(path.parent)
    if nearest.is_dir() and nearest != path.parent.absolute():
        raise UsageError("output-directory-missing", f"{option} {path}: the directory {path.parent} does not "
                                                     "exist; name a file in an existing directory (ddplab does "
                                                     "not create it)")
    _probe(nearest, option, path)


def check_output_dir(path: str | Path, option: str) -> None:
    """Refuse now a directory ddplab could not create or write into."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UsageError("output-not-a-directory", f"{option} {path} exists and is not a directory")
    _probe(_nearest_existing(path), option, path)


def _nearest_existing(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def make_directory(path: str | Path, option: str) -> None:
    """``mkdir -p`` before a launch: a path that is a file or unwritable is bad input (exit 2)."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UsageError("output-not-a-directory", f"{option} {path} exists and is not a directory") from None
    except OSError as exc:
        if exc.errno in _NO_SPACE:
            raise DiskFull(path) from None
        raise UsageError("output-not-writable", f"{option} {path} cannot be created: {exc.strerror or exc}") from None


def raise_if_full(directory: str | Path, what: str = "") -> None:
    """After a failure: when ``directory`` cannot take one more page, a full disk is the real cause."""
    try:
        _write_probe(Path(directory))
    except OSError as exc:
        if exc.errno in _NO_SPACE:
            raise DiskFull(directory, what) from None


def _probe(directory: Path, option: str, target: Path) -> None:
    """Write (and remove) one page in ``directory``: permissions, read-only mounts and a full disk all show up
    here, before anything is launched."""
    if not directory.is_dir():
        raise UsageError("output-not-writable", f"{option} {target}: {directory} is not a directory")
    try:
        _write_probe(directory)
    except OSError as exc:
        if exc.errno in _NO_SPACE:
            raise DiskFull(target) from None
        raise UsageError("output-not-writable",
                         f"{option} {target} cannot be written: {exc.strerror or exc} ({directory})") from None


def _write_probe(directory: Path) -> None:
    probe = _temp_name(directory / ".ddplab-probe")
    try:
        _write_new_file(probe, "\0" * PROBE_BYTES, durable=True)
    finally:
        _remove_quietly(probe)


def _temp_name(path: Path) -> Path:
    # Hidden and unique: readers that list a directory (pid files) skip names they cannot parse.
    return path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")


def _write_new_file(path: Path, text: str, durable: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # 0o666: the umask decides, as for open()
    with open(fd, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        if durable:
            os.fsync(f.fileno())


def _fsync_directory(directory: Path) -> None:
    """Make the rename itself durable (the directory entry lives in the directory)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):  # some filesystems cannot fsync a directory; the data itself is on disk
            os.fsync(fd)
    finally:
        os.close(fd)


def _remove_quietly(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
