"""Durable file writes: atomic replacement, a replaced file kept until it may go, disk errors,
fault points.

Every whole-file write goes through `atomic_write` (temporary file in the same folder, fsync,
rename, fsync of the folder), so a crash leaves each file whole-old or whole-new; `Kept` holds the
version a write replaced until the caller knows the new one may stand. Records that
grow (the index, the journal, the archive...) are rows of logs/agent.db instead (store/db.py).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import signal
from pathlib import Path

from agent.common.outcomes import DiskError
from agent.common.walk import MAX_DEPTH, Walk

SECRET_DIR_MODE = 0o700
SECRET_FILE_MODE = 0o600


def disk_error(path: Path, exc: OSError) -> DiskError:
    reason = exc.strerror or str(exc)
    hint = {
        errno.ENOSPC: " (the disk is full)",
        errno.EROFS: " (the file system is read-only)",
        errno.EACCES: " (permission denied)",
        errno.EDQUOT: " (disk quota exceeded)",
    }.get(exc.errno, "")
    return DiskError(f"could not write {path}: {reason}{hint}")


# Fault injection for tests/system/test_durability.py, inert unless AGENT_TEST_KILL_AT is set: with
# AGENT_TEST_KILL_AT=N the process SIGKILLs itself at the N-th fault point it passes (the lock
# and each write step below), so a test can prove that a kill at every step loses nothing.
_KILL_AT = os.environ.get("AGENT_TEST_KILL_AT", "")
_fault_points_passed = 0


def fault_point(step: str) -> None:
    global _fault_points_passed
    if _KILL_AT:
        _fault_points_passed += 1
        if str(_fault_points_passed) == _KILL_AT:
            os.write(2, f"AGENT_TEST_KILL_AT: killed at {step}\n".encode())
            os.kill(os.getpid(), signal.SIGKILL)


# atomic_write's temporary files, beside their target: ".<name>.<pid>.<8 hex digits>.tmp".
TEMPORARY_NAME = re.compile(r"\..+\.\d+\.[0-9a-f]{8}\.tmp")


def temporary_path(target: Path) -> Path:
    """A fresh name beside `target` of the form the sweep after a crash removes (TEMPORARY_NAME)."""
    return target.parent / f".{target.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"


def atomic_write(path: Path, data: bytes, mode: int = SECRET_FILE_MODE) -> None:
    """Replace `path` with `data` so that a crash leaves either the old or the new file whole.
    A `mode` other than the private default is set whatever the umask (a file others must read)."""
    tmp = temporary_path(path)
    created = False
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
        created = True
        if mode != SECRET_FILE_MODE:
            os.fchmod(fd, mode)
        fault_point(f"{path.name}: temporary file created")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            fault_point(f"{path.name}: temporary file written")
            os.fsync(handle.fileno())
        fault_point(f"{path.name}: temporary file synced")
        os.replace(tmp, path)
        created = False
        fault_point(f"{path.name}: renamed")
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        fault_point(f"{path.name}: folder synced")
    except OSError as exc:
        raise disk_error(path, exc) from exc
    finally:
        if created:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _sync_folder(folder: Path) -> None:
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class Kept:
    """A file as it was, kept while a new version replaces it, until what makes the new one count is
    written (a cycle's record: agent/cycle/run.py). `put_back` restores it (or removes the new file when
    there was none), `drop` lets it go. Kept by a hard link under a temporary's name, so keeping costs
    no space, putting back is a rename that works on a full disk, and one a killed process leaves is
    swept like any temporary; where links are refused, its bytes are kept in memory instead."""

    def __init__(self, path: Path):
        self.path, self.link, self.data = path, None, None
        self.existed = path.exists()
        if not self.existed:
            return
        link = temporary_path(path)
        try:
            os.link(path, link, follow_symlinks=False)
            self.link = link
        except OSError:  # a file system without hard links
            try:
                self.data = path.read_bytes()
            except OSError as exc:
                raise disk_error(path, exc) from exc
        fault_point(f"{path.name}: previous kept")

    def put_back(self) -> str | None:
        """Restore the file as it was; None when done, else why it could not be."""
        try:
            if self.link is not None:
                os.replace(self.link, self.path)
                self.link = None
                _sync_folder(self.path.parent)
            elif self.data is not None:
                atomic_write(self.path, self.data)
            elif not self.existed:
                self.path.unlink(missing_ok=True)
        except (OSError, DiskError) as exc:
            return str(exc)
        return None

    def drop(self) -> None:
        if self.link is not None:
            with contextlib.suppress(OSError):  # left behind, it is swept as a temporary
                os.unlink(self.link)
            self.link = None
        self.data = None


def remove_temporaries(folder: Path, recursive: bool = False, left_out: list[str] | None = None) -> list[Path]:
    """Delete the regular files in `folder` (and below it, if `recursive`: a bounded, iterative
    walk, `common/walk.py`, which adds to `left_out` what it could not reach) named like
    atomic_write's temporary files. Call only while holding the home's lock, so none is in use."""
    removed = []
    walk = Walk(folder, max_depth=MAX_DEPTH if recursive else 1)
    for entry in walk:  # symlinks are never followed
        if entry.is_file and TEMPORARY_NAME.fullmatch(entry.name):
            with contextlib.suppress(OSError):
                os.unlink(entry.name, dir_fd=entry.folder_fd)
                removed.append(folder.joinpath(*entry.parts))
    if recursive and left_out is not None and walk.describe():
        left_out.append(f"{folder}: {walk.describe()}")
    return removed
