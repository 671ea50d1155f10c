"""The home's lock: one cycle or state-changing command at a time."""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path
from typing import Iterator

from ..outcomes import Busy
from .files import SECRET_FILE_MODE, disk_error, fault_point
from .home import Home

# How long a lock must stay taken before a cycle reports busy, when no --wait was asked for.
BUSY_GRACE_SECONDS = 0.1


@contextlib.contextmanager
def file_lock(path: Path, deadline: float | None = None, poll: float = 0.05) -> Iterator[int]:
    """Hold an exclusive kernel flock on `path` (created, owner-only, if missing); yields its descriptor.

    The one open/flock/close of the package: the home's lock, the inbox's and the approvals file's.
    The kernel releases the flock when the process dies, even on kill -9; the descriptor is not
    inherited by child processes; closing it releases the lock. deadline: a time.monotonic() past
    which a lock still held raises BlockingIOError (checked every `poll` seconds); None: wait for it.
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, SECRET_FILE_MODE)
    except OSError as exc:
        raise disk_error(path, exc) from exc
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX if deadline is None else fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(min(poll, max(0.0, deadline - time.monotonic())))
        yield fd
    finally:
        os.close(fd)  # closing the descriptor releases the flock


@contextlib.contextmanager
def home_lock(home: Home, wait: float = 0) -> Iterator[None]:
    """Hold the home's lock or raise Busy.

    A kernel flock on .agent.lock (`file_lock`), so a crashed cycle never leaves the home blocked
    and a tool's leftover child cannot keep it locked. The file is never unlinked (unlinking a
    flocked file lets two processes lock two different inodes).
    (Not the filelock package: importing it costs more than the rest of a cycle's start-up.)
    """
    # Even with no wait asked for, a lock held only for an instant (`agent status` or `doctor`
    # checking it) must not make a cron cycle skip: a real cycle holds it for seconds.
    deadline = time.monotonic() + max(wait, BUSY_GRACE_SECONDS)
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(file_lock(home.lock_file, deadline, poll=0.01 if wait == 0 else 0.05))
        except BlockingIOError:
            waited = f" after waiting {wait:g}s" if wait else ""
            raise Busy(f"another agent process holds the lock on {home.root}{waited}; try again later") from None
        fault_point("lock taken")
        yield


def is_locked(home: Home) -> bool:
    """Whether some process holds the home's lock right now (takes and drops it if free)."""
    if not home.lock_file.exists():
        return False
    try:
        with home_lock(home):
            return False
    except Busy:
        return True
