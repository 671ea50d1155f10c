"""The home's lock: one cycle or state-changing command at a time.

A kernel flock on .agent.lock, so a crashed cycle never leaves the home blocked and a tool's leftover
child cannot keep it locked (the descriptor is not inherited). The file is never unlinked (unlinking a
flocked file lets two processes lock two different inodes). Not the filelock package: importing it
costs more than the rest of a cycle's start-up. What several processes write at once (the records,
parked calls, the inbox) is kept consistent by the database's own locking instead (store/db.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from agent.common.files import SECRET_FILE_MODE, disk_error, fault_point
from agent.common.outcomes import Busy
from agent.store.home import Home

# How long a lock must stay taken before a cycle reports busy, when no --wait was asked for: a lock
# held only for an instant (`agent status` or `doctor` checking it) must not make a cron cycle skip.
BUSY_GRACE_SECONDS = 0.1

# While a process holds the lock, the lock file holds this byte; a holder that ends normally empties
# it again. A byte found there when taking the lock means a holder was killed (kill -9, power loss)
# and may have left temporary files: a sweep is owed. So a cycle finds out, without listing any
# folder, whether it must look for leftovers (agent/cycle/crash.py).
HELD_MARK = b"1"
_held: set[Path] = set()  # the homes whose lock this process holds


@dataclass
class Held:
    """The lock, held. `owed`: a holder before us was killed and no sweep has happened since;
    call `swept()` once leftovers are removed, so the mark goes when the lock is released."""

    owed: bool
    cleared: bool = False

    def swept(self) -> None:
        self.cleared = True


@contextlib.contextmanager
def home_lock(home: Home, wait: float = 0) -> Iterator[Held]:
    """Hold the home's lock, or raise Busy once `wait` seconds (at least the grace period) pass."""
    try:
        fd = os.open(home.lock_file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, SECRET_FILE_MODE)
    except OSError as exc:
        raise disk_error(home.lock_file, exc) from exc
    try:
        deadline = time.monotonic() + max(wait, BUSY_GRACE_SECONDS)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    waited = f" after waiting {wait:g}s" if wait else ""
                    raise Busy(
                        f"another agent process holds the lock on {home.root}{waited}; try again later"
                    ) from None
                time.sleep(min(0.01 if wait == 0 else 0.05, max(0.0, deadline - time.monotonic())))
        held = Held(owed=_mark(fd))
        fault_point("lock taken")
        _held.add(home.root)
        try:
            yield held
        finally:
            _held.discard(home.root)
        if not held.owed or held.cleared:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # closing the descriptor releases the flock


@contextlib.contextmanager
def holding_lock(home: Home, wait: float) -> Iterator[None]:
    """Hold the home's lock for what follows, unless this process already holds it."""
    with contextlib.ExitStack() as stack:
        if home.root not in _held:
            stack.enter_context(home_lock(home, wait))
        yield


def _mark(fd: int) -> bool:
    """Whether the held mark was already there (a sweep owed); leaves it there. Best effort: on a
    full disk a cycle still runs (clean_after_crash then also looks at the newest cycle's files)."""
    try:
        if os.pread(fd, len(HELD_MARK), 0) == HELD_MARK:
            return True
        os.pwrite(fd, HELD_MARK, 0)
    except OSError:
        pass
    return False


def is_locked(home: Home) -> bool:
    """Whether some process holds the home's lock right now (takes and drops it if free)."""
    if not home.lock_file.exists():
        return False
    try:
        with home_lock(home):
            return False
    except Busy:
        return True
