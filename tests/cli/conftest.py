"""Homes with a few real cycles in them, made by running scripted cycles."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.helpers import done, echo, run_cycle
from tests.helpers import write_active


@pytest.fixture
def worked_home(home: Path) -> Path:
    """A home after two done cycles: task one -> two -> three."""
    write_active(
        home,
        {
            "goals": ["ship it"],
            "current_task": "one",
            "pending_actions": ["two", "three"],
            "completed_tasks": [],
            "notes": "",
            "last_updated": None,
        },
    )
    assert run_cycle(home, [echo("hi"), done("did one")]).exit_code == 0
    assert run_cycle(home, [done("did two")]).exit_code == 0
    return home


@pytest.fixture
def four_cycles(home: Path) -> Path:
    """A home after four done cycles."""
    for _ in range(4):
        assert run_cycle(home, [done("ok")]).exit_code == 0
    return home
