"""Fixtures for the store tests."""

from __future__ import annotations

import datetime as dt
from typing import Callable

import pytest

from agent.store.cycles import new_cycle_id
from agent.store.home import Home


def _start_cycle(home: Home, now: dt.datetime) -> str:
    cycle_id = new_cycle_id(home, now)
    for label in ("before", "after"):
        home.snapshot(cycle_id, label).write_text("{}")
    home.cycle_log(cycle_id).write_text("")
    return cycle_id


@pytest.fixture
def start_cycle() -> Callable[[Home, dt.datetime], str]:
    """start_cycle(home, now): name a cycle and leave its snapshot pair and log, as the runner does."""
    return _start_cycle
