"""The home's lock: one holder at a time, Busy for everyone else, free again when released."""

from __future__ import annotations

import re
import threading
import time

import pytest

from agent.common.outcomes import Busy, DiskError
from agent.store.home import Home
from agent.store.lock import BUSY_GRACE_SECONDS, file_lock, home_lock, is_locked


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


def test_file_lock_creates_an_owner_only_file_and_refuses_a_second_holder_past_its_deadline(tmp_path):
    path = tmp_path / "x.lock"
    with file_lock(path):
        assert path.stat().st_mode & 0o777 == 0o600
        with pytest.raises(BlockingIOError), file_lock(path, deadline=time.monotonic() + 0.05):
            pass
    with file_lock(path, deadline=time.monotonic()):  # free again once released
        pass


def test_file_lock_without_a_deadline_waits_for_the_holder(tmp_path):
    path = tmp_path / "x.lock"
    holding, taken = threading.Event(), threading.Event()

    def second_taker():
        holding.wait(60)
        with file_lock(path):
            taken.set()

    worker = threading.Thread(target=second_taker)
    with file_lock(path):
        worker.start()
        holding.set()
        assert not taken.wait(0.2)  # still held: the second taker waits (a bounded check, not synchronisation)
    assert taken.wait(60)
    worker.join(60)


def test_file_lock_names_the_file_it_cannot_open(tmp_path):
    with pytest.raises(DiskError, match="missing"), file_lock(tmp_path / "missing" / "x.lock"):
        pass
