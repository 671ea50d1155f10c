"""Cycle ids: unique (even between processes), the same length, and always sorting after every
cycle the home knows of, so snapshot and log names list in the order the cycles ran under plain
`ls` and `sort`."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from pathlib import Path

import pytest

from agent.common.cycle_ids import cycle_started, following_cycle_id
from agent.common.outcomes import InvalidScratchpad
from agent.store.cycles import add_record, new_cycle_id
from agent.store.db import records
from agent.store.home import Home

MOMENT = dt.datetime(2026, 4, 1, 10, 1, 37, tzinfo=dt.timezone.utc)


@pytest.fixture
def h(home: Path) -> Home:
    made = Home.at(home)
    made.ensure_dirs()
    return made


def test_the_first_cycle_of_a_second_is_its_second_then_01(h):
    assert new_cycle_id(h, MOMENT) == "20260401_100137_01"


def test_a_local_time_is_named_in_utc(h):
    paris_summer = dt.timezone(dt.timedelta(hours=2))
    assert new_cycle_id(h, MOMENT.astimezone(paris_summer)) == "20260401_100137_01"


def test_same_second_snapshots_and_logs_list_in_the_order_the_cycles_ran(h, start_cycle):
    ids = [start_cycle(h, MOMENT) for _ in range(3)]
    assert ids == ["20260401_100137_01", "20260401_100137_02", "20260401_100137_03"]
    for label in ("before", "after"):
        names = sorted(p.name for p in h.scratchpad.glob(f"*_{label}.yaml"))
        assert names == [f"{i}_{label}.yaml" for i in ids]
    assert sorted(p.name for p in h.logs.glob("cycle_*.log")) == [f"cycle_{i}.log" for i in ids]


def test_a_hundredth_cycle_in_one_second_moves_to_the_next_second_to_keep_order(h, start_cycle):
    ids = [start_cycle(h, MOMENT) for _ in range(101)]
    assert len(set(ids)) == 101 and ids == sorted(ids)
    assert ids[98] == "20260401_100137_99" and ids[99] == "20260401_100138_01"


def test_an_id_pruned_away_is_not_reused_out_of_order(h, start_cycle):
    for _ in range(3):
        start_cycle(h, MOMENT)
    for path in (
        h.snapshot("20260401_100137_01", "before"),
        h.snapshot("20260401_100137_01", "after"),
        h.cycle_log("20260401_100137_01"),
    ):
        path.unlink()  # retention removed the oldest
    assert new_cycle_id(h, MOMENT) == "20260401_100137_04"


def test_a_clock_stepped_back_continues_after_the_newest_cycle_on_disk(h, start_cycle):
    newest = start_cycle(h, MOMENT)
    assert new_cycle_id(h, MOMENT - dt.timedelta(days=3)) == "20260401_100137_02" > newest


def test_a_clock_stepped_back_continues_after_the_newest_cycle_in_the_index(h):
    """Even when retention deleted that cycle's files, the index still knows it."""
    add_record(h, {"cycle_id": "20260401_100137_05"})
    assert new_cycle_id(h, MOMENT - dt.timedelta(hours=1)) == "20260401_100137_06"


def test_two_processes_naming_cycles_at_once_never_choose_the_same_id(h):
    """The newest id is read and the new one taken in one transaction (SQLite's write lock)."""
    code = (
        "import datetime as dt, sys; from agent.store.home import Home; from agent.store.cycles import new_cycle_id; "
        "t = dt.datetime(2026, 4, 1, 10, 1, 37, tzinfo=dt.timezone.utc); "
        "print(' '.join(new_cycle_id(Home.at(sys.argv[1]), t) for _ in range(40)))"
    )
    new_cycle_id(h, MOMENT)  # the database made, so both processes open the same one
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(h.root)], stdout=subprocess.PIPE, text=True) for _ in range(3)
    ]
    ids = [i for p in procs for i in p.communicate(timeout=120)[0].split()]
    assert len(ids) == 120 and len(set(ids)) == 120


def test_the_clock_is_used_again_once_it_passes_the_newest_cycle(h, start_cycle):
    start_cycle(h, MOMENT)
    assert new_cycle_id(h, MOMENT + dt.timedelta(seconds=1)) == "20260401_100138_01"


def test_after_a_bare_id_from_an_older_version_the_next_second_keeps_ls_order(h, start_cycle):
    """`..._02_before.yaml` would sort before an older version's `..._before.yaml`."""
    h.snapshot("20260401_100137", "before").write_text("{}")
    following = start_cycle(h, MOMENT)
    assert following == "20260401_100138_01"
    assert sorted(p.name for p in h.scratchpad.glob("*_before.yaml"))[-1] == f"{following}_before.yaml"


def test_an_older_versions_suffixed_ids_are_continued_after_their_second():
    assert following_cycle_id(MOMENT, ["20260401_100137", "20260401_100137_02"]) == "20260401_100138_01"
    assert following_cycle_id(MOMENT, ["20260401_100136", "20260401_100136_02"]) == "20260401_100137_01"


def test_both_id_forms_are_cycles_and_other_names_are_not(home):
    h = Home.at(home)
    h.ensure_dirs()
    for name in (
        "20260401_100137",
        "20260401_100137_02",
        "20260401_100138_01",
        "20261399_000000",
        "20260401_100139_1",
        "notes",
        "20260401_100140_001",
    ):
        h.snapshot(name, "before").write_text("{}")
    known = [i for (i,) in records(h).rows("SELECT id FROM cycle ORDER BY id")]  # the upgrade listed them
    assert known == ["20260401_100137", "20260401_100137_02", "20260401_100138_01"]
    assert cycle_started("20260401_100138_01") == dt.datetime(2026, 4, 1, 10, 1, 38, tzinfo=dt.timezone.utc)
    assert cycle_started("20261399_000000") is None and cycle_started("notes") is None


def test_a_snapshot_named_at_the_end_of_the_calendar_is_not_taken_as_a_cycle(h):
    """The upgrade lists the cycles on disk: one in the year 9999 would leave no id to follow it."""
    h.snapshot("99991231_235959_99", "before").write_text("{}")
    assert new_cycle_id(h, MOMENT) == "20260401_100137_01"


def test_a_cycle_id_at_the_end_of_the_calendar_is_a_clear_error(h):
    db = records(h)
    with db.write():
        db.execute("INSERT INTO cycle (id) VALUES ('99991231_235959_99')")
    with pytest.raises(
        InvalidScratchpad, match="the newest cycle id, 99991231_235959_99, is at the end of the calendar"
    ):
        new_cycle_id(h, MOMENT)
