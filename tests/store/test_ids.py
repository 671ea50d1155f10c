"""Cycle ids: unique, and sorting in the order the cycles ran."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from agent.store.home import Home
from agent.store.ids import new_cycle_id

MOMENT = dt.datetime(2026, 4, 1, 10, 1, 37, tzinfo=dt.timezone.utc)


@pytest.fixture
def h(home: Path) -> Home:
    made = Home.at(home)
    made.ensure_dirs()
    return made


def test_a_hundredth_cycle_in_one_second_moves_to_the_next_second_to_keep_order(h):
    ids = []
    for _ in range(101):
        cid = new_cycle_id(h, MOMENT)
        h.snapshot(cid, "before").write_text("{}")
        ids.append(cid)
    assert len(set(ids)) == 101 and ids == sorted(ids)
    assert ids[98] == "20260401_100137_99" and ids[99] == "20260401_100138"


def test_an_id_pruned_away_is_not_reused_out_of_order(h):
    for _ in range(3):
        h.snapshot(new_cycle_id(h, MOMENT), "before").write_text("{}")
    h.snapshot("20260401_100137", "before").unlink()  # retention removed the oldest
    assert new_cycle_id(h, MOMENT) == "20260401_100137_04"
