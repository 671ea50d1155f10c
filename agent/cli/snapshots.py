"""Naming a saved state on the command line: 'active', 'latest', 'ID', 'ID:before', 'ID:after'.

`agent diff`, `agent restore` and `agent fork` all read their arguments through `resolve_snapshot`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from agent.common.outcomes import Busy, UsageError
from agent.scratchpad import read_state_file
from agent.store.cycles import with_files_newest_first
from agent.store.home import Home
from agent.store.lock import is_locked


@dataclass
class Side:
    """One side of a diff: a state and the file it came from."""

    label: str  # what the user sees: a path relative to the home
    state: dict
    text: str


def _file_side(home: Home, path: Path) -> Side:
    return Side(str(path.relative_to(home.root)), read_state_file(path, home.root), path.read_text(encoding="utf-8"))


def latest_saved(home: Home, cycles: Sequence[str]) -> str:
    """The newest cycle with a snapshot pair (idle cycles write none), else the newest cycle: the
    newest few known, then the cycles with files on disk, newest first, as far as the first found."""
    if not cycles:
        raise UsageError(f"no cycles in {home.root} yet; run `agent run` first")
    newest = list(cycles[-3:])
    ids = itertools.chain(reversed(newest), with_files_newest_first(home))  # lazily
    return next((c for c in ids if home.snapshot(c, "before").is_file()), newest[-1])


def resolve_snapshot(
    home: Home, spec: str, default_label: str, cycles: Sequence[str], under_lock: bool = False
) -> Side:
    """'active', 'latest', 'ID', 'ID:before' or 'ID:after' -> the state it names. `cycles`: the ids known, oldest
    first (`history.KnownCycles`: the newest few, any other looked up when named). The newest cycle
    without the snapshot while another process holds the lock is running: Busy (exit 5), as every
    command that waits for a cycle says (`under_lock`: the caller holds it, so no cycle runs)."""
    if spec == "active":
        if not home.active.exists():
            raise UsageError(f"{home.active} does not exist yet (run a cycle, or agent init)")
        return _file_side(home, home.active)
    cycle_id, _, label = spec.partition(":")
    label = label or default_label
    if label not in ("before", "after"):
        raise UsageError(f"'{spec}': after the colon put before or after")
    if cycle_id == "latest":
        cycle_id = latest_saved(home, cycles)
    if cycle_id not in cycles:
        near = ", ".join(cycles[-3:]) or "none yet"
        raise UsageError(f"no cycle '{cycle_id}' in {home.root} (latest: {near}; `agent history` lists them all)")
    path = home.snapshot(cycle_id, label)
    if not path.is_file() and not under_lock and cycle_id == cycles[-1] and is_locked(home):
        raise Busy(f"cycle {cycle_id} is still running (it has no {label} snapshot yet); try again when it has ended")
    if not path.is_file():
        raise UsageError(
            f"cycle {cycle_id} has no {label} snapshot ({path.relative_to(home.root)} is missing: "
            f"the cycle was pruned, or it was killed before saving)"
        )
    return _file_side(home, path)
