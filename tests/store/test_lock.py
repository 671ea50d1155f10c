"""The home's lock: one holder at a time, Busy for everyone else, free again when released."""

from __future__ import annotations

import re
import time

import pytest

from agent.outcomes import Busy
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
