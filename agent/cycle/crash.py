"""Before a cycle: finding and removing what a killed process left (temporary files), in time that
does not grow with the number of cycles run when nothing was killed."""

from __future__ import annotations

from pathlib import Path

from agent.store.cycles import count_files, newest_cycle
from agent.store.home import Home, remove_stale_temporaries
from agent.store.lock import Held


def unfinished_cycle(home: Home) -> str | None:
    """The newest cycle's id if it has a before snapshot and no after one (it was killed); else None.
    The newest is one row of logs/agent.db (agent/common/cycle_ids.py): no folder is listed."""
    newest = newest_cycle(home)
    killed = (
        newest is not None and home.snapshot(newest, "before").exists() and not home.snapshot(newest, "after").exists()
    )
    return newest if killed else None


class Sweep(list):
    """The temporary files the after-crash sweep removed; `problem` says what it could not do."""

    problem: str | None = None
    killed: str | None = None  # the id of the cycle a kill left unfinished (None: the last one finished)

    @property
    def note(self) -> str:
        """ "" or "; " and the problem: the end of the cycle log's first line."""
        return f"; {self.problem}" if self.problem else ""


def clean_after_crash(home: Home, workspace: Path, held: Held | None = None) -> Sweep:
    """Before a cycle: remove_stale_temporaries (the workspace too), only when a lock holder was
    killed since the last sweep (`held.owed`, agent/store/lock.py) or the last cycle was killed.
    Only a killed process leaves a temporary file (atomic_write removes its own on any error), and
    listing scratchpad/ and logs/ every cycle would grow with every cycle ever run.
    Never raises: a sweep that fails (a tree too deep or unreadable) is a `problem` for the cycle
    log, and the cycle goes on."""
    swept, left_out = Sweep(), []
    try:
        swept.killed = unfinished_cycle(home)
        if swept.killed is not None:
            count_files(home, swept.killed)  # what it left on disk, counted as a record would have
        if not (held is not None and held.owed) and swept.killed is None:
            return swept
        swept.extend(remove_stale_temporaries(home, workspace, left_out))
        if left_out:
            swept.problem = f"after-crash sweep did not reach {'; '.join(left_out)}"
        if held is not None:
            held.swept()
    except Exception as exc:  # noqa: BLE001 - leftovers are harmless; a cycle that never runs is not
        swept.problem = f"after-crash sweep failed, the cycle goes on: {type(exc).__name__}: {exc}"
    return swept
