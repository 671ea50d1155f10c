"""The home's lock: one holder at a time, Busy for everyone else, free again when released."""

from __future__ import annotations

import re
import threading
import time

import pytest

from agent.common.outcomes import Busy, DiskError
from agent.store.home import Home
from agent.store.lock import BUSY_GRACE_SECONDS, home_lock, is_locked


def test_is_locked_is_true_only_while_the_lock_is_held(home):
    h = Home.at(home)
    assert not is_locked(h)
    with home_lock(h):
        assert is_locked(h)
    assert not is_locked(h)


def test_a_second_taker_is_busy_after_the_grace_period(home):
    h = Home.at(home)
    with home_lock(h):
        started = time.monotonic()
        with pytest.raises(Busy, match=re.escape(f"another agent process holds the lock on {home}; try again later")):
            with home_lock(h):
                pass
        assert time.monotonic() - started >= BUSY_GRACE_SECONDS


def test_a_second_taker_with_a_wait_says_how_long_it_waited(home):
    h = Home.at(home)
    with home_lock(h), pytest.raises(Busy, match="after waiting 0.2s"):
        with home_lock(h, wait=0.2):
            pass


def test_the_lock_is_released_when_its_holder_raises(home):
    h = Home.at(home)
    with pytest.raises(RuntimeError), home_lock(h):
        raise RuntimeError("a failed cycle")
    assert not is_locked(h)


def test_an_error_inside_the_held_lock_is_not_mistaken_for_busy(home):
    h = Home.at(home)
    with pytest.raises(BlockingIOError), home_lock(h):
        raise BlockingIOError("from the body, not from the lock")
    assert not is_locked(h)


def test_the_lock_file_is_owner_only_and_a_home_that_cannot_hold_one_is_a_disk_error(tmp_path):
    h = Home.at(tmp_path)
    with home_lock(h):
        assert h.lock_file.stat().st_mode & 0o777 == 0o600
    with pytest.raises(DiskError, match="missing"), home_lock(Home.at(tmp_path / "missing")):
        pass


def test_a_taker_with_a_wait_gets_the_lock_once_the_holder_lets_go(home):
    h = Home.at(home)
    holding, taken = threading.Event(), threading.Event()

    def second_taker():
        holding.wait(60)
        with home_lock(h, wait=60):
            taken.set()

    worker = threading.Thread(target=second_taker)
    with home_lock(h):
        worker.start()
        holding.set()
        assert not taken.wait(0.2)  # still held: the second taker waits (a bounded check, not synchronisation)
    assert taken.wait(60)
    worker.join(60)
