"""Cycle ids: `YYYYMMDD_HHMMSS` (UTC), the second a cycle started, with `_NN` appended when that
second is already taken. A cycle's snapshots and log are named after its id."""

from __future__ import annotations

import datetime as _dt
import re

from .home import Home

CYCLE_ID = re.compile(r"^\d{8}_\d{6}(?:_\d+)?$")
SNAPSHOT_LABELS = ("before", "after")


def cycle_started(cycle_id: str) -> _dt.datetime | None:
    """The UTC start time written in a cycle id, or None when the id is not one of ours."""
    try:
        return _dt.datetime.strptime(cycle_id[:15], "%Y%m%d_%H%M%S").replace(tzinfo=_dt.timezone.utc)
    except ValueError:
        return None


def cycles_on_disk(home: Home) -> list[str]:
    """Ids of every cycle with a snapshot or a log still on disk, oldest first."""
    ids: set[str] = set()
    for label in SNAPSHOT_LABELS:
        suffix = f"_{label}.yaml"
        ids |= {p.name[: -len(suffix)] for p in home.scratchpad.glob(f"*{suffix}")}
    ids |= {p.name[len("cycle_"): -len(".log")] for p in home.logs.glob("cycle_*.log")}
    return sorted(i for i in ids if CYCLE_ID.match(i))


def new_cycle_id(home: Home, now: _dt.datetime) -> str:
    """`YYYYMMDD_HHMMSS` (UTC), or with `_NN` appended when that second is already taken.

    Ids sort in time order as strings; UTC keeps that true across daylight-saving changes.
    Call while holding the lock so two processes cannot choose the same id.
    """
    base = now.astimezone(_dt.timezone.utc).strftime("%Y%m%d_%H%M%S")
    taken = {p.name[: -len("_before.yaml")] for p in home.scratchpad.glob(f"{base}*_before.yaml")}
    taken |= {p.stem[len("cycle_"):] for p in home.logs.glob(f"cycle_{base}*.log")}
    if not taken:
        return base
    # never reuse the bare id once the second has others, even if retention deleted it
    suffixes = [int(t[len(base) + 1:]) for t in taken if t != base and t[len(base) + 1:].isdigit()]
    following = max(suffixes, default=1) + 1
    if following > 99:  # "_100" would sort before "_99": take the next second instead
        return new_cycle_id(home, now + _dt.timedelta(seconds=1))
    return f"{base}_{following:02d}"
