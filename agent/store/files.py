"""Durable file writes: atomic replacement, JSON-lines appends, disk errors, fault points.

Every whole-file write goes through `atomic_write` (temporary file in the same folder, fsync,
rename, fsync of the folder), so a crash leaves each file whole-old or whole-new.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
from pathlib import Path

from ..outcomes import DiskError

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


# Fault injection for tests/test_durability.py, inert unless AGENT_TEST_KILL_AT is set: with
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


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so that a crash leaves either the old or the new file whole."""
    tmp = path.parent / f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    created = False
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, SECRET_FILE_MODE)
        created = True
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


# ---------------------------------------------------------------------------------- JSON lines


def append_jsonl(path: Path, records: list[dict]) -> None:
    """Append records as JSON lines with one write, then fsync (readers skip a torn tail)."""
    if not records:
        return
    data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, SECRET_FILE_MODE)
        try:
            fault_point(f"{path.name}: before append")
            os.write(fd, data)
            os.fsync(fd)
            fault_point(f"{path.name}: appended")
        finally:
            os.close(fd)
    except OSError as exc:
        raise disk_error(path, exc) from exc


def read_jsonl(path: Path, required_key: str) -> list[dict]:
    """Every whole record (a JSON object with `required_key`) in a JSON-lines file, oldest first.

    A torn last line (a crash mid-append) or a foreign line is skipped."""
    try:
        lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return []
    records = []
    for line in lines:
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if isinstance(record, dict) and required_key in record:
                records.append(record)
    return records
