"""When a home's cycles are due: the `schedule` setting, a cron expression read by cronsim (the
library Healthchecks.io reads its checks' schedules with), in a time zone, with a grace.

A slot is a time the expression names. A slot is met when a cycle ran (or held the lock) at any
time from it until the next slot: a cron line whose run found the lock busy (exit 5, no record)
is covered by the cycle that held the lock. A slot is missed when its grace has passed and no
cycle met it. cronsim is imported only here, and this module only where a schedule is set, so a
plain cycle's start-up never pays for it.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import Iterator

DEFAULT_GRACE_S = 3600.0  # as Healthchecks.io's checks: an hour after a slot before it is missed
MOST_SLOTS_COUNTED = 10_000  # a home stopped for years at a minute's schedule: counted as "at least this many"


class ScheduleError(ValueError):
    """An expression or time zone that cannot be read: the message says which and why."""


@dataclass(frozen=True)
class Schedule:
    expression: str
    timezone: str = "UTC"
    grace_s: float = DEFAULT_GRACE_S

    @property
    def zone(self) -> _dt.tzinfo:
        return time_zone(self.timezone)

    def slots_after(self, when: float) -> Iterator[float]:
        """The slots strictly after unix time `when`, in order, as unix times."""
        from cronsim import CronSim

        start = _dt.datetime.fromtimestamp(int(when), self.zone)
        for slot in CronSim(self.expression, start):
            yield slot.timestamp()

    def slot_at_or_before(self, when: float) -> float | None:
        """The newest slot at or before unix time `when` (None: none in the last five years)."""
        from cronsim import CronSim

        start = _dt.datetime.fromtimestamp(int(when) + 1, self.zone)
        try:
            return next(iter(CronSim(self.expression, start, reverse=True))).timestamp()
        except StopIteration:  # pragma: no cover - cronsim gives up only past its own horizon
            return None

    def next_slot(self, when: float) -> float:
        return next(self.slots_after(when))


def time_zone(name: str) -> _dt.tzinfo:
    """The tz database's zone `name` (UTC: the standard library's own)."""
    if name.upper() == "UTC":
        return _dt.timezone.utc
    import zoneinfo

    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise ScheduleError(f"{name!r} is not a time zone of the tz database (e.g. UTC, Europe/Berlin)") from None


def checked(expression: str, timezone: str, grace_s: float) -> Schedule:
    """A Schedule whose expression and zone have been read once (ScheduleError when they cannot be)."""
    from cronsim import CronSim, CronSimError

    schedule = Schedule(expression.strip(), timezone, grace_s)
    if len(schedule.expression.split()) != 5:
        raise ScheduleError(f"{expression!r} is not a cron expression of five fields (minute hour day month weekday)")
    try:
        CronSim(schedule.expression, _dt.datetime.now(schedule.zone))
    except CronSimError as exc:
        raise ScheduleError(f"{expression!r} is not a cron expression: {exc}") from None
    return schedule


@dataclass(frozen=True)
class Slots:
    """Where a home stands against its schedule at `now` (unix times; None where there is none)."""

    now: float
    last_met: float | None  # the newest slot a cycle met (None: no cycle yet)
    next_due: float  # the first slot no cycle has met yet (in the past when the home is late or down)
    missed: int  # slots after last_met whose grace has passed with no cycle
    first_missed: float | None
    grace_s: float
    at_least: bool = False  # missed reached MOST_SLOTS_COUNTED and counting stopped there

    @property
    def late(self) -> bool:
        """A slot is due and unmet, within its grace."""
        return self.missed == 0 and self.now >= self.next_due

    @property
    def down(self) -> bool:
        """A slot's grace has passed with no cycle."""
        return self.missed > 0


def slots(schedule: Schedule, cycles: list[tuple[float, float]], now: float) -> Slots:
    """Count the slots of `schedule` against `cycles` (start, end unix times; a running one ends
    `now`): the newest slot met, the next due, and the slots missed since. The newest cycle meets
    the newest slot at or before its end (it ran between that slot and the next)."""
    newest_end = max((end for _, end in cycles), default=None)
    last_met = None if newest_end is None else schedule.slot_at_or_before(newest_end)
    since = last_met if last_met is not None else (newest_end if newest_end is not None else now)
    missed, first_missed, next_due, at_least = 0, None, None, False
    for slot in schedule.slots_after(since):
        if next_due is None:
            next_due = slot
        if slot + schedule.grace_s > now:
            break
        missed += 1
        first_missed = slot if first_missed is None else first_missed
        if missed >= MOST_SLOTS_COUNTED:
            at_least = True
            break
    assert next_due is not None  # a checked expression always names a next slot
    return Slots(now, last_met, next_due, missed, first_missed, schedule.grace_s, at_least)
