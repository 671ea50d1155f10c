"""Before a cycle: finding and removing what a killed process left (temporary files), in time that
does not grow with the number of cycles run when nothing was killed."""

from __future__ import annotations

from pathlib import Path

from .home import Home, remove_stale_temporaries
from .ids import newest_cycle
from .lock import Held


def last_cycle_unfinished(home: Home) -> bool:
    """Whether the newest cycle has a before snapshot and no after one: it was killed. The newest
    is read from logs/cycles.json (agent/store/ids.py); only a home without it is listed."""
    newest = newest_cycle(home)
    return newest is not None and home.snapshot(newest, "before").exists() \
        and not home.snapshot(newest, "after").exists()


def clean_after_crash(home: Home, workspace: Path, held: Held | None = None) -> list[Path]:
    """Before a cycle: remove_stale_temporaries, only when a lock holder was killed since the last
    sweep (`held.owed`, agent/store/lock.py) or the last cycle was killed; the workspace then too.
    Only a killed process leaves a temporary file (atomic_write removes its own on any error), and
    listing scratchpad/ and logs/ every cycle would grow with every cycle ever run."""
    owed = held is not None and held.owed
    if not owed and not last_cycle_unfinished(home):
        return []
    removed = remove_stale_temporaries(home, workspace)
    if held is not None:
        held.swept()
    return removed
