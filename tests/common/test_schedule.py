"""The `schedule` setting's slots (agent/common/schedule.py): met, late, missed, across daylight-saving
changes in a zone that has them."""

from __future__ import annotations

import datetime as _dt
import zoneinfo

import pytest

from agent.common.schedule import ScheduleError, checked, slots

BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")


def _at(*args: int, zone=BERLIN) -> float:
    return _dt.datetime(*args, tzinfo=zone).timestamp()


def _ran(*starts: float, took: float = 30.0) -> list[tuple[float, float]]:
    return [(start, start + took) for start in starts]


def test_a_cycle_after_its_slot_meets_it_and_the_next_is_due():
    schedule = checked("0 2 * * *", "Europe/Berlin", 3600)
    found = slots(schedule, _ran(_at(2026, 11, 3, 2, 0, 5)), now=_at(2026, 11, 3, 9))
    assert found.last_met == _at(2026, 11, 3, 2) and found.next_due == _at(2026, 11, 4, 2)
    assert (found.missed, found.late, found.down) == (0, False, False)


def test_a_slot_within_its_grace_is_late_not_missed():
    schedule = checked("0 2 * * *", "Europe/Berlin", 3600)
    found = slots(schedule, _ran(_at(2026, 11, 3, 2, 0, 5)), now=_at(2026, 11, 4, 2, 30))
    assert (found.missed, found.late, found.down) == (0, True, False)


def test_each_slot_past_its_grace_with_no_cycle_is_missed():
    schedule = checked("0 2 * * *", "Europe/Berlin", 3600)
    found = slots(schedule, _ran(_at(2026, 11, 3, 2, 0, 5)), now=_at(2026, 11, 6, 3, 30))
    assert (found.missed, found.first_missed, found.down) == (3, _at(2026, 11, 4, 2), True)


def test_a_cycle_that_held_the_lock_through_a_slot_meets_it():
    """cron's run at 03:00 found the lock busy (exit 5, no record): the cycle of 02:00 still ran then."""
    schedule = checked("0 * * * *", "UTC", 600)
    long_one = [(_at(2026, 11, 3, 2, 0, 5, zone=_dt.timezone.utc), _at(2026, 11, 3, 3, 20, zone=_dt.timezone.utc))]
    found = slots(schedule, long_one, now=_at(2026, 11, 3, 3, 40, zone=_dt.timezone.utc))
    assert found.last_met == _at(2026, 11, 3, 3, zone=_dt.timezone.utc) and found.missed == 0


def test_hourly_slots_count_every_real_hour_across_the_autumn_change():
    """25 October 2026, Berlin: 03:00 CEST is 02:00 CET again, so that day has 25 hours and 25 slots."""
    schedule = checked("0 * * * *", "Europe/Berlin", 60)
    midnight = _at(2026, 10, 25, 0)
    found = slots(schedule, _ran(midnight), now=_at(2026, 10, 26, 0, 5))
    assert found.missed == 25  # 01:00, 02:00 CEST, 02:00 CET, 03:00 ... 23:00, and 00:00 of the 26th
    assert found.missed == round((_at(2026, 10, 26, 0) - midnight) / 3600)


def test_hourly_slots_count_every_real_hour_across_the_spring_change():
    """29 March 2026, Berlin: 02:00 CET is 03:00 CEST, so that day has 23 hours and 23 slots."""
    schedule = checked("0 * * * *", "Europe/Berlin", 60)
    midnight = _at(2026, 3, 29, 0)
    found = slots(schedule, _ran(midnight), now=_at(2026, 3, 30, 0, 5))
    assert found.missed == 23  # 01:00, 03:00 ... 23:00, and 00:00 of the 30th
    assert found.missed == round((_at(2026, 3, 30, 0) - midnight) / 3600)


def test_a_daily_slot_in_the_skipped_hour_runs_once_at_the_hour_after_it_as_cron_does():
    schedule = checked("30 2 * * *", "Europe/Berlin", 600)
    found = slots(schedule, _ran(_at(2026, 3, 28, 2, 30, 5)), now=_at(2026, 3, 31, 12))
    assert found.missed == 3 and found.first_missed == _at(2026, 3, 29, 3)


def test_a_daily_slot_in_the_repeated_hour_is_one_slot():
    schedule = checked("30 2 * * *", "Europe/Berlin", 600)
    found = slots(schedule, _ran(_at(2026, 10, 24, 2, 30, 5)), now=_at(2026, 10, 26, 12))
    assert found.missed == 2


@pytest.mark.parametrize(
    ("expression", "zone", "said"),
    [
        ("every day", "UTC", "not a cron expression of five fields"),
        ("61 * * * *", "UTC", "not a cron expression"),
        ("0 2 * * *", "Mars/Olympus", "not a time zone"),
    ],
)
def test_an_expression_or_zone_that_cannot_be_read_is_said(expression, zone, said):
    with pytest.raises(ScheduleError, match=said):
        checked(expression, zone, 600)
