"""Retention: which cycles' snapshot pairs and logs to delete, and deleting them.

A cycle's files are `scratchpad/<id>_before.yaml`, `scratchpad/<id>_after.yaml`,
`logs/cycle_<id>.log` and `logs/cycle_<id>.transcript.jsonl`. Nothing else is ever removed here: not active.yaml, not the cycle index
(so `agent history` still lists pruned cycles), not logs/archive.jsonl (so completed tasks stay
reachable).

The rules are *keep* rules and a cycle goes only when every rule given lets it go:
`keep_cycles=N` keeps the newest N cycles, `keep_days=D` keeps cycles that started less than D
days ago, and always the newest cycle. With both, `--keep 10 --older-than 7d` deletes week-old
cycles but never the last ten, so a home whose cron stopped for a month does not lose its whole
history.

"Newest" is by id order, which is the order the cycles ran (see ids.py), never by the time
written in an id: a clock that was wrong when an id was made must not get newer cycles pruned.

`select_expired` is pure (ids in, ids out); `plan_prune` and `delete_cycles` do the I/O.
`apply_retention` is what the cycle runner calls, while it holds the home's lock.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from agent.common.outcomes import UsageError

if TYPE_CHECKING:  # a type only: config sits above the store
    from agent.config import Settings
from agent.store.home import Home
from agent.store.ids import CYCLE_FILE_FORMS, SNAPSHOT_LABELS, cycle_started

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.IGNORECASE)


def parse_duration(text: str) -> float:
    """'7d', '12h', '30m', '90s', '2w', '1.5d' -> seconds. UsageError for anything else."""
    match = _DURATION.match(str(text))
    if not match:
        raise UsageError(f"duration '{text}' is not a number followed by a unit: s, m, h, d or w (e.g. 7d, 12h)")
    return float(match.group(1)) * _UNITS[match.group(2).lower()]


def cycle_files(home: Home, cycle_id: str) -> list[Path]:
    """The files one cycle left that exist now (its snapshot pair, its log and its transcript)."""
    paths = [home.snapshot(cycle_id, label) for label in SNAPSHOT_LABELS] + [
        home.cycle_log(cycle_id),
        home.transcript(cycle_id),
    ]
    return [p for p in paths if p.is_file()]


def select_expired(
    cycle_ids: Iterable[str],
    keep_cycles: int | None = None,
    keep_days: float | None = None,
    now: _dt.datetime | None = None,
    protect: Iterable[str] = (),
) -> list[str]:
    """The ids (oldest first) that no keep rule keeps. No rule given: nothing expires.

    `protect` ids are always kept (the runner passes the cycle it is finishing).
    """
    ids = sorted(set(cycle_ids))
    if keep_cycles is None and keep_days is None:
        return []
    now = now or _dt.datetime.now(_dt.timezone.utc)
    kept = set(protect)
    if keep_cycles is not None:
        kept |= set(ids[max(0, len(ids) - keep_cycles) :]) if keep_cycles > 0 else set()
    if keep_days is not None:
        try:
            cutoff = now - _dt.timedelta(days=keep_days)
        except OverflowError:  # "older than" beyond the calendar: nothing is that old
            cutoff = _dt.datetime.min.replace(tzinfo=_dt.timezone.utc)
        kept |= {i for i in ids if (cycle_started(i) or now) >= cutoff}
        kept |= set(ids[-1:])  # a clock now fast, or all cycles old: the newest still stays
    return [i for i in ids if i not in kept]


@dataclass
class PrunePlan:
    """What a prune would delete (or did): cycle ids, their files and the bytes they hold."""

    remove: list[str] = field(default_factory=list)
    keep: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    bytes: int = 0
    sizes: dict[Path, int] = field(default_factory=dict)  # each file's size when planned

    def as_dict(self, root: Path) -> dict[str, Any]:
        return {
            "removed_cycles": self.remove,
            "kept_cycles": len(self.keep),
            "files": [shown(p) for p in self.files],
            "bytes": self.bytes,
        }


def shown(path: Path) -> str:
    """A cycle file's path as the operator sees it: relative to the home (`scratchpad/...`, `logs/...`)."""
    return f"{path.parent.name}/{path.name}"


def _files_by_cycle(home: Home) -> dict[str, list[int]]:
    """Each cycle on disk (a snapshot or a log) and which of its files there are (places in
    CYCLE_FILE_FORMS, in order): names only, from one listing per folder, sorted by id."""
    names: dict[str, list[str]] = {}
    for folder in (home.scratchpad, home.logs):
        try:
            names[folder.name] = os.listdir(folder)
        except FileNotFoundError:
            names[folder.name] = []
    present = [
        {
            name[len(prefix) : -len(suffix)]
            for name in names[where]
            if name.endswith(suffix) and name.startswith(prefix) and len(name) > len(prefix) + len(suffix)
        }
        for where, prefix, suffix, _ in CYCLE_FILE_FORMS
    ]  # a set of ids per form: one pass each
    on_disk = set().union(*(ids for ids, form in zip(present, CYCLE_FILE_FORMS) if form[3]))
    return {i: [place for place, ids in enumerate(present) if i in ids] for i in sorted(on_disk) if cycle_started(i)}


def plan_prune(
    home: Home,
    keep_cycles: int | None = None,
    keep_days: float | None = None,
    now: _dt.datetime | None = None,
    protect: Iterable[str] = (),
) -> PrunePlan:
    """Which cycles and files the rules would remove. Reads only, in time linear in the files on disk."""
    files = _files_by_cycle(home)
    ids = sorted(files)
    doomed = select_expired(ids, keep_cycles, keep_days, now, protect)
    gone = set(doomed)  # built once: linear in the cycles on disk, however many expire
    plan = PrunePlan(remove=doomed, keep=[i for i in ids if i not in gone])
    folders = {"scratchpad": home.scratchpad, "logs": home.logs}
    for cycle_id in doomed:
        for place in files[cycle_id]:
            folder, prefix, suffix, _ = CYCLE_FILE_FORMS[place]
            path = folders[folder] / f"{prefix}{cycle_id}{suffix}"
            with contextlib.suppress(OSError):
                info = os.stat(path)
                if stat.S_ISREG(info.st_mode):  # a regular file, or a link to one, as Path.is_file says
                    plan.files.append(path)
                    plan.sizes[path] = info.st_size
                    plan.bytes += info.st_size
    return plan


def delete_cycles(plan: PrunePlan) -> list[Path]:
    """Delete the plan's files (call while holding the lock); the ones actually deleted."""
    deleted = []
    for path in plan.files:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            deleted.append(path)
    return deleted


def apply_retention(
    home: Home, settings: Settings, protect: Iterable[str] = (), now: _dt.datetime | None = None
) -> list[Path]:
    """Automatic retention from settings.keep_cycles / settings.keep_days (None: keep all).

    For the cycle runner, after it has written its own files and while it still holds the lock;
    pass the running cycle's id in `protect`. Returns the files deleted ([] when retention is off).
    """
    plan = retention_plan(home, settings, protect, now)
    return [] if plan is None else delete_cycles(plan)


def retention_plan(
    home: Home, settings: Settings, protect: Iterable[str] = (), now: _dt.datetime | None = None
) -> PrunePlan | None:
    """What automatic retention would delete; None when retention is off (nothing on disk is read)."""
    if settings.keep_cycles is None and settings.keep_days is None:
        return None
    return plan_prune(home, settings.keep_cycles, settings.keep_days, now, protect)
