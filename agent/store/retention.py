"""Retention: which cycles' files to delete, and deleting them.

Pruning a cycle is three unlinks (its snapshot pair and log) and, for a batch of cycles at once,
one transaction that deletes their transcripts and marks their rows as having no files; then the
freed pages go back to the file system (incremental vacuum). Nothing else is ever removed: not
active.yaml, not a cycle's record (history lists pruned cycles; what they spent never goes down),
not the archive.

The rules are *keep* rules and a cycle goes only when every rule given lets it go: `keep_cycles=N`
keeps the newest N cycles, `keep_days=D` those that started less than D days ago, and always the
newest (`--keep 10 --older-than 7d` never leaves fewer than ten). "Newest" is by id order, the
order the cycles ran (common/cycle_ids.py), never the time in an id: a clock that was wrong must not get newer
cycles pruned. So what expires is a prefix of the cycles with files, read oldest first from the
database's index of them, only as many as expire: no folder is listed.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import itertools
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

from agent.common.cycle_ids import cycle_started
from agent.common.files import fault_point
from agent.store.connection import Database
from agent.store.db import records
from agent.store.home import Home
from agent.store.provenance import drop_stale_writes

if TYPE_CHECKING:  # a type only: config sits above the store
    from agent.config import Settings

AUTO_PRUNE_CYCLES = 1000  # expired cycles a cycle's automatic retention deletes at most; the next cycle goes on
BATCH_CYCLES = 256  # expired cycles whose files go before their rows are marked, in one transaction
VACUUM_PAGES = 25_000  # pages one prune gives back to the file system at most; the rest, next time
# A cycle's files: (its folder, the part before its id, the part after), in the order they go
CYCLE_FILES = (("scratchpad", "", "_before.yaml"), ("scratchpad", "", "_after.yaml"), ("logs", "cycle_", ".log"))


def expired_cycles(
    db: Database,
    keep_cycles: int | None = None,
    keep_days: float | None = None,
    now: _dt.datetime | None = None,
    protect: Iterable[str] = (),
) -> tuple[int, Iterator[str]]:
    """(how many cycles have files, the ids of those no keep rule keeps, oldest first, streamed)."""
    count = db.one("SELECT count(*) FROM cycle WHERE files")[0]
    if keep_cycles is None and keep_days is None:
        return count, iter(())
    now = now or _dt.datetime.now(_dt.timezone.utc)
    limit = count if keep_cycles is None else count - keep_cycles
    cutoff = None
    if keep_days is not None:
        limit = min(limit, count - 1)  # a clock now fast, or all cycles old: the newest still stays
        with contextlib.suppress(OverflowError):  # "older than" beyond the calendar: nothing is that old
            cutoff = now - _dt.timedelta(days=keep_days)
        if cutoff is None:
            return count, iter(())
    ids = (i for (i,) in db.stream("SELECT id FROM cycle WHERE files ORDER BY id LIMIT ?", (max(0, limit),)))
    young = (lambda i: (cycle_started(i) or now) >= cutoff) if cutoff else (lambda i: False)
    protected = set(protect)
    return count, (i for i in itertools.takewhile(lambda i: not young(i), ids) if i not in protected)


@dataclass
class Pruned:
    """What a prune found (and, unless a dry run, deleted): counts, never the lists themselves."""

    cycles: int = 0  # expired cycles
    kept: int = 0  # cycles with files that the rules keep
    files: int = 0  # their files (regular files, or links to one)
    bytes: int = 0
    deleted: int = 0  # files actually deleted
    transcripts: int = 0  # cycles whose transcript (rows of the database) went, or would go, with them


def prune_cycles(
    home: Home,
    keep_cycles: int | None = None,
    keep_days: float | None = None,
    now: _dt.datetime | None = None,
    protect: Iterable[str] = (),
    dry_run: bool = False,
    limit: int | None = None,
    on_cycle: Callable[[str], None] | None = None,
    on_file: Callable[[str, int, bool], None] | None = None,
    workspace: Path | None = None,
) -> Pruned:
    """Delete the files and transcripts of the cycles no rule keeps (oldest first; at most `limit`
    cycles): each expired id is heard of by `on_cycle`, then each of its files that is a regular file
    (or a link to one) is sized and, unless `dry_run`, unlinked, and heard of by `on_file(shown path,
    size, deleted)`. Call while holding the lock. Killed midway, it leaves the oldest cycles gone and
    those of at most one batch with some files gone but still marked, so the next prune ends them.
    `workspace` given: the records of the model's writes to files since deleted or changed in size go
    too (agent/store/provenance.py `drop_stale_writes`)."""
    db, result = records(home), Pruned()
    count, expired = expired_cycles(db, keep_cycles, keep_days, now, protect)
    expired = itertools.islice(expired, limit)
    folders = {f.name: os.open(f, os.O_RDONLY | os.O_DIRECTORY) for f in (home.scratchpad, home.logs) if f.is_dir()}
    try:
        while batch := list(itertools.islice(expired, BATCH_CYCLES)):
            result.cycles += len(batch)
            for cycle_id in batch:
                if on_cycle is not None:
                    on_cycle(cycle_id)
                _prune_files(folders, cycle_id, dry_run, result, on_file)
            marks = ",".join("?" * len(batch))
            result.transcripts += db.one(
                f"SELECT count(DISTINCT cycle_id) FROM transcript WHERE cycle_id IN ({marks})", batch
            )[0]
            if not dry_run:
                with db.write():  # the batch's transcripts and the marks of its files, together
                    db.execute(f"DELETE FROM transcript WHERE cycle_id IN ({marks})", batch)
                    db.execute(
                        "UPDATE cycle SET files = 0, snapshot_files = 0, snapshot_bytes = 0, log_files = 0, "
                        f"log_bytes = 0 WHERE id IN ({marks})",
                        batch,
                    )
        result.kept = count - result.cycles
    finally:
        for fd in folders.values():
            os.close(fd)
    if workspace is not None and not dry_run:
        drop_stale_writes(home, workspace)
    if result.transcripts and not dry_run:
        with contextlib.suppress(Exception), db.errors():  # space given back is a bonus; the prune is done
            db.connection.executescript(f"PRAGMA incremental_vacuum({VACUUM_PAGES});")  # steps to the end
    return result


def _prune_files(
    folders: dict[str, int], cycle_id: str, dry_run: bool, result: Pruned, on_file: Callable | None
) -> None:
    for where, prefix, suffix in CYCLE_FILES:
        name = f"{prefix}{cycle_id}{suffix}"
        try:
            info = os.stat(name, dir_fd=folders[where])  # a link to a file: the file's
        except (FileNotFoundError, NotADirectoryError, KeyError):
            continue
        if not stat.S_ISREG(info.st_mode):
            continue  # a folder named like a cycle's file: never ours to delete
        deleted = False
        if not dry_run:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=folders[where])
                deleted = True
                fault_point(f"prune: {name} deleted")
        result.files, result.bytes, result.deleted = (
            result.files + 1,
            result.bytes + info.st_size,
            result.deleted + deleted,
        )
        if on_file is not None:
            on_file(f"{where}/{name}", info.st_size, deleted)


def apply_retention(
    home: Home, settings: Settings, protect: Iterable[str] = (), now: _dt.datetime | None = None
) -> Pruned | None:
    """Automatic retention (None when keep_cycles and keep_days are off), for the cycle runner under
    the lock, `protect` the running cycle: at most `AUTO_PRUNE_CYCLES`, the oldest, per cycle."""
    if settings.keep_cycles is None and settings.keep_days is None:
        return None
    return prune_cycles(
        home,
        settings.keep_cycles,
        settings.keep_days,
        now,
        protect,
        limit=AUTO_PRUNE_CYCLES,
        workspace=home.root / settings.workspace,
    )
