"""The home's lock: one cycle or state-changing command at a time."""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from typing import Iterator

from ..outcomes import Busy
from .files import SECRET_FILE_MODE, disk_error, fault_point
from .home import Home

# How long a lock must stay taken before a cycle reports busy, when no --wait was asked for.
BUSY_GRACE_SECONDS = 0.1


@contextlib.contextmanager
def home_lock(home: Home, wait: float = 0) -> Iterator[None]:
    """Hold the home's lock or raise Busy.

    A kernel flock on .agent.lock: released by the kernel when the process dies, even on kill -9,
    so a crashed cycle never leaves the home blocked. The file is never unlinked (unlinking a
    flocked file lets two processes lock two different inodes). The descriptor is not inherited
    by child processes, so a tool's leftover child cannot keep the home locked.
    (Not the filelock package: importing it costs more than the rest of a cycle's start-up.)
    """
    try:
        fd = os.open(home.lock_file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, SECRET_FILE_MODE)
    except OSError as exc:
        raise disk_error(home.lock_file, exc) from exc
    # Even with no wait asked for, a lock held only for an instant (`agent status` or `doctor`
    # checking it) must not make a cron cycle skip: a real cycle holds it for seconds.
    deadline = time.monotonic() + max(wait, BUSY_GRACE_SECONDS)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    waited = f" after waiting {wait:g}s" if wait else ""
                    raise Busy(f"another agent process holds the lock on {home.root}{waited}; "
                               "try again later") from None
                time.sleep(min(0.01 if wait == 0 else 0.05, max(0.0, deadline - time.monotonic())))
        fault_point("lock taken")
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock


def is_locked(home: Home) -> bool:
    """Whether some process holds the home's lock right now (takes and drops it if free)."""
    if not home.lock_file.exists():
        return False
    try:
        with home_lock(home):
            return False
    except Busy:
        return True
