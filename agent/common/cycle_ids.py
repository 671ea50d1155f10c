"""Cycle ids: `YYYYMMDD_HHMMSS_NN`, a start second in UTC and the cycle's place in that second.

A cycle's snapshots and log are named after its id (`<id>_before.yaml`, `cycle_<id>.log`), so
plain `ls` and `sort` list them in the order the cycles ran. The rule that keeps this true:

- Every id has the same length: the first cycle of a second is `_01`, then `_02` ... `_99`. A
  name that continues after the id therefore sorts exactly like the id.
- A new id sorts after every id given before (and every cycle an upgrade found on disk). When
  the clock's second is later than the newest id's, the new id is `<the clock's second>_01`.
  Otherwise (another cycle in the same second, or a clock stepped back) it is the newest id's
  successor: the same prefix, the sequence plus one. After a clock step back, ids keep the newest
  id's time until the clock catches up; after a clock that ran fast, the time it showed.
- The successor is the next second's `_01` instead when the sequence is at 99, or when the
  newest id's second also holds a bare `YYYYMMDD_HHMMSS` id (older versions named a second's
  first cycle without a suffix, and `..._03_before.yaml` would sort before `..._before.yaml`).

So the time in an id is when the cycle ran only as far as the clock was right; order comes from
comparing ids as strings. UTC keeps the order across daylight-saving changes. This module is the
rule, a pure one; `new_cycle_id` (agent/store/cycles.py) applies it to the newest id in logs/agent.db.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Iterable

CYCLE_ID = re.compile(r"\d{8}_\d{6}(?:_\d{2})?")
SECOND_FORMAT = "%Y%m%d_%H%M%S"
SECOND_LENGTH = len("YYYYMMDD_HHMMSS")
LAST_SEQUENCE = 99
SNAPSHOT_LABELS = ("before", "after")


def cycle_started(cycle_id: str) -> _dt.datetime | None:
    """The UTC time written in a cycle id, or None when the id is not one of ours."""
    if not CYCLE_ID.fullmatch(cycle_id):
        return None
    try:  # the digits are checked above; datetime() checks the calendar (strptime costs 5x more)
        return _dt.datetime(
            int(cycle_id[0:4]),
            int(cycle_id[4:6]),
            int(cycle_id[6:8]),
            int(cycle_id[9:11]),
            int(cycle_id[11:13]),
            int(cycle_id[13:15]),
            tzinfo=_dt.timezone.utc,
        )
    except ValueError:  # 20261399_...: the shape of an id, but no time
        return None


def is_cycle_id(text: object) -> bool:
    """Whether `text`, read from a file nobody checked (an older release's), is an id this agent
    could have given and can go on after: the form, a real time, and a year before 9999 (an id in
    the calendar's last year leaves no room for the ids after it, and would stop every later cycle)."""
    return isinstance(text, str) and cycle_started(text) is not None and text[:4] < "9999"


def following_cycle_id(now: _dt.datetime, existing: Iterable[str]) -> str:
    """The id for a cycle starting at `now` after the cycles `existing` (the rule above)."""
    ids = {i for i in existing if cycle_started(i)}
    clock_second = now.astimezone(_dt.timezone.utc).strftime(SECOND_FORMAT)
    newest = max(ids, default="")
    newest_second, sequence = newest[:SECOND_LENGTH], newest[SECOND_LENGTH + 1 :]
    if clock_second > newest_second:
        return f"{clock_second}_01"
    if newest_second not in ids and int(sequence) < LAST_SEQUENCE:
        return f"{newest_second}_{int(sequence) + 1:02d}"
    next_second = cycle_started(newest_second) + _dt.timedelta(seconds=1)  # OverflowError after 9999
    return f"{next_second.strftime(SECOND_FORMAT)}_01"
