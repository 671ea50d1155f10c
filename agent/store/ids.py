"""Cycle ids: `YYYYMMDD_HHMMSS_NN`, a start second in UTC and the cycle's place in that second.

A cycle's snapshots and log are named after its id (`<id>_before.yaml`, `cycle_<id>.log`), so
plain `ls` and `sort` list them in the order the cycles ran. The rule that keeps this true:

- Every id has the same length: the first cycle of a second is `_01`, then `_02` ... `_99`. A
  name that continues after the id therefore sorts exactly like the id.
- A new id sorts after every id on disk (snapshots, cycle logs) and in the recent index. When
  the clock's second is later than the newest id's, the new id is `<the clock's second>_01`.
  Otherwise (another cycle in the same second, or a clock stepped back) it is the newest id's
  successor: the same prefix, the sequence plus one. After a clock step back, ids keep the newest
  id's time until the clock catches up; after a clock that ran fast, the time it showed.
- The successor is the next second's `_01` instead when the sequence is at 99, or when the
  newest id's second also holds a bare `YYYYMMDD_HHMMSS` id (older versions named a second's
  first cycle without a suffix, and `..._03_before.yaml` would sort before `..._before.yaml`).

So the time in an id is when the cycle ran only as far as the clock was right; order comes from
comparing ids as strings. Ids made by older versions (`YYYYMMDD_HHMMSS`, then `_02`, `_03` ...)
are read alike. UTC keeps the order across daylight-saving changes.

The newest id ever given is kept in logs/cycles.json, written (atomically) as the id is chosen, with
the ids of the cycles that never wrote their index record (killed, or a full disk), the newest
`UNRECORDED_KEPT` of them. So naming a cycle reads that small file and the index's tail, never a
listing of scratchpad/ and logs/; only a home without the file (made by an older version) is
listed once.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
from typing import Iterable

from agent.common.outcomes import InvalidScratchpad
from agent.store.files import atomic_write
from agent.store.home import Home, index_newest_first, read_index

CYCLE_ID = re.compile(r"\d{8}_\d{6}(?:_\d{2})?")
SECOND_FORMAT = "%Y%m%d_%H%M%S"
SECOND_LENGTH = len("YYYYMMDD_HHMMSS")
LAST_SEQUENCE = 99
SNAPSHOT_LABELS = ("before", "after")
# The newest index records are in its last bytes; reading them all would grow with every cycle.
INDEX_TAIL_BYTES = 64 * 1024
CYCLES_NAME = "cycles.json"
UNRECORDED_KEPT = 1000


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


# A cycle's files, by name: (its folder, the part before its id, the part after, whether it alone makes
# a cycle on disk), in the order a cycle's files are listed
CYCLE_FILE_FORMS = (
    ("scratchpad", "", "_before.yaml", True),
    ("scratchpad", "", "_after.yaml", True),
    ("logs", "cycle_", ".log", True),
    ("logs", "cycle_", ".transcript.jsonl", False),
)


def cycle_of(folder: str, name: str) -> tuple[str | None, int]:
    """(the cycle id a file `name` in `folder` (scratchpad or logs) belongs to, or None; its place in
    CYCLE_FILE_FORMS)."""
    for place, (where, prefix, suffix, _) in enumerate(CYCLE_FILE_FORMS):
        if (
            where == folder
            and name.startswith(prefix)
            and name.endswith(suffix)
            and len(name) > len(prefix) + len(suffix)
        ):
            return name[len(prefix) : -len(suffix)], place
    return None, -1


def cycles_on_disk(home: Home) -> list[str]:
    """Ids of every cycle with a snapshot or a log still on disk, oldest first (one listing per folder)."""
    ids: set[str] = set()
    for folder in (home.scratchpad, home.logs):
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            continue
        for name in names:
            cycle_id, place = cycle_of(folder.name, name)
            if cycle_id is not None and CYCLE_FILE_FORMS[place][3]:
                ids.add(cycle_id)
    return sorted(i for i in ids if cycle_started(i))


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


def cycles_file(home: Home) -> dict | None:
    """logs/cycles.json: {"newest": the newest id given, "unrecorded": ids without an index record};
    None when it is missing or not in that shape (the caller then lists the folders)."""
    try:
        data = json.loads((home.logs / CYCLES_NAME).read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    if not (
        isinstance(data, dict)
        and isinstance(data.get("newest"), str)
        and cycle_started(data["newest"])
        and isinstance(data.get("unrecorded"), list)
    ):
        return None
    return {
        "newest": data["newest"],
        "unrecorded": [i for i in data["unrecorded"] if isinstance(i, str) and cycle_started(i)][-UNRECORDED_KEPT:],
    }


def has_files(home: Home, cycle_id: str) -> bool:
    """Whether a cycle still has a snapshot or its log on disk."""
    return any(
        p.exists() for p in (*(home.snapshot(cycle_id, label) for label in SNAPSHOT_LABELS), home.cycle_log(cycle_id))
    )


def _recent_recorded(home: Home) -> list[str]:
    """The ids in the index's tail, and its newest record's however long that record is."""
    try:
        recent = [r["cycle_id"] for r in read_index(home, tail_bytes=INDEX_TAIL_BYTES)]
        newest = next(index_newest_first(home), None)
    except OSError:  # an index that cannot be read is reported when the cycle appends to it
        return []
    return recent + ([newest["cycle_id"]] if newest else [])


def newest_cycle(home: Home) -> str | None:
    """The newest cycle id given in this home (recorded or not), without listing folders when
    logs/cycles.json is there; None when there was none."""
    known = cycles_file(home)
    ids = [known["newest"]] if known else cycles_on_disk(home)
    return max([*ids, *(i for i in _recent_recorded(home) if cycle_started(i))], default=None)


def new_cycle_id(home: Home, now: _dt.datetime) -> str:
    """The id for a cycle of `home` starting at `now`, after every cycle on disk or in the index,
    noted in logs/cycles.json. Call while holding the lock so two processes cannot choose the same id."""
    recent = _recent_recorded(home)
    known = cycles_file(home)
    if known is None:  # once: a home from before logs/cycles.json
        on_disk = cycles_on_disk(home)
        newest_recorded = max((i for i in recent if cycle_started(i)), default="")
        existing, unrecorded = [*on_disk, *recent], [i for i in on_disk if i > newest_recorded]
    else:
        previous, unrecorded = known["newest"], known["unrecorded"]
        if previous not in recent and previous not in unrecorded and has_files(home, previous):
            unrecorded.append(previous)  # it ended without its record: killed, or the disk was full
        existing = [previous, *recent]
    try:
        cycle_id = following_cycle_id(now, existing)
    except OverflowError:
        raise InvalidScratchpad(
            f"{home.root}: a cycle id is already at the end of the calendar (year 9999); "
            "move the snapshots and logs named after it away"
        ) from None
    record = {"newest": cycle_id, "unrecorded": unrecorded[-UNRECORDED_KEPT:]}
    atomic_write(home.logs / CYCLES_NAME, json.dumps(record).encode("utf-8"))
    return cycle_id
