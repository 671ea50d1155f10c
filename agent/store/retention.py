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

`select_expired` is the rule, pure (ids in, ids out). `prune_cycles` applies it to a home in one
streamed pass, in bounded memory (`CyclesOnDisk`, `expired_cycles`): `agent prune` uses it.
`apply_retention` (`retention_plan`, then `delete_cycles`) is what the cycle runner calls while it
holds the home's lock; it deletes at most `AUTO_PRUNE_CYCLES` expired cycles per cycle, the oldest,
so a cycle's time stays bounded when retention is turned on over a long history.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import itertools
import operator
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from agent.common.outcomes import DiskError, UsageError
from agent.store.home import Home
from agent.store.ids import CYCLE_FILE_FORMS, cycle_started

if TYPE_CHECKING:  # a type only: config sits above the store
    from agent.config import Settings

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0)
AUTO_PRUNE_CYCLES = 1000  # expired cycles a cycle's automatic retention deletes at most; the next cycle goes on

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.IGNORECASE)


def parse_duration(text: str) -> float:
    """'7d', '12h', '30m', '90s', '2w', '1.5d' -> seconds. UsageError for anything else."""
    match = _DURATION.match(str(text))
    if not match:
        raise UsageError(f"duration '{text}' is not a number followed by a unit: s, m, h, d or w (e.g. 7d, 12h)")
    return float(match.group(1)) * _UNITS[match.group(2).lower()]


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


# A cycle id that `cycle_started` accepts, as a regular expression: the shape of CYCLE_ID, with the
# clock's ranges (hour 00-23, minute and second 00-59) and the calendar's (year 0001-9999; a month's
# days; 29 February in leap years only). Tests hold it to `cycle_started`. Matching names with it
# keeps a listing's every step in C: no Python call per name.
_LEAP_YEAR = r"(?:\d\d(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)"
_DATE = (
    r"(?!0000)(?:\d{4}(?:(?:0[1-9]|1[0-2])(?:0[1-9]|1\d|2[0-8])|(?:0[13-9]|1[0-2])(?:29|30)|(?:0[13578]|1[02])31)"
    rf"|{_LEAP_YEAR}0229)"
)
VALID_ID = rf"{_DATE}_(?:[01]\d|2[0-3])[0-5]\d[0-5]\d(?:_\d{{2}})?"


def _making_pattern(folder: str) -> re.Pattern:
    """The names in `folder` of the files that alone make a cycle on disk (CYCLE_FILE_FORMS), the id
    their one group."""
    forms = [(prefix, suffix) for where, prefix, suffix, making in CYCLE_FILE_FORMS if making and where == folder]
    (prefix,) = {prefix for prefix, _ in forms}  # one prefix per folder: the id is always group 1
    suffixes = "|".join(re.escape(suffix) for _, suffix in forms)
    return re.compile(f"{re.escape(prefix)}({VALID_ID})(?:{suffixes})")


_MAKING = {folder: _making_pattern(folder) for folder in ("scratchpad", "logs")}
_BATCH = 256  # ids per INSERT statement
CACHE_KIB = 2048  # SQLite's page cache for the id table; beyond it the table spills to a temporary file
IN_MEMORY_NAMES = 8192  # cycle files whose ids are sorted in memory; more go to SQLite


def _cycle_ids(folders: dict[str, int]) -> Iterator[str]:
    """The id of every file that makes a cycle on disk, streamed (one entry of a folder at a time);
    an id comes once per such file. `folders`: open scratchpad/ and logs/, by name."""
    for name, fd in folders.items():
        with os.scandir(fd) as entries:
            names = map(operator.attrgetter("name"), entries)
            yield from map(operator.itemgetter(1), filter(None, map(_MAKING[name].fullmatch, names)))


class CyclesOnDisk:
    """The ids of the cycles with a snapshot or a log on disk, oldest first, from one streamed listing
    per folder (names only: no stat). Up to `IN_MEMORY_NAMES` cycle files (what retention keeps,
    500 cycles by default, is far fewer) they are sorted in memory; beyond, they go to a temporary
    SQLite table whose memory is its page cache (`CACHE_KIB`; more spills to a temporary file that
    SQLite has already unlinked), whatever the number of cycles on disk. Use as a context manager."""

    def __init__(self, folders: dict[str, int]):
        self._db: Any = None
        ids = _cycle_ids(folders)
        first = set(itertools.islice(ids, IN_MEMORY_NAMES))
        more = next(ids, None)
        if more is None:
            self._sorted = sorted(first)
            self.count: int = len(self._sorted)
        else:
            self._sorted = []
            self._fill(itertools.chain(first, [more], ids))

    def _fill(self, ids: Iterator[str]) -> None:
        import sqlite3  # here: a cycle whose retention keeps a few hundred cycles never loads it

        self._db = sqlite3.connect("")  # "": a private temporary database, gone when closed
        try:
            self._db.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
            self._db.execute("CREATE TABLE cycle (id TEXT PRIMARY KEY) WITHOUT ROWID")
            insert = "INSERT OR IGNORE INTO cycle VALUES " + ",".join(["(?)"] * _BATCH)
            while batch := list(itertools.islice(ids, _BATCH)):
                if len(batch) == _BATCH:
                    self._db.execute(insert, batch)
                else:
                    self._db.executemany("INSERT OR IGNORE INTO cycle VALUES (?)", ((i,) for i in batch))
            self.count = self._db.execute("SELECT count(*) FROM cycle").fetchone()[0]
        except sqlite3.Error as exc:  # the temporary file could not be written (TMPDIR full or read-only)
            self.close()
            raise DiskError(f"could not list the cycles on disk in a temporary database: {exc}") from None
        except BaseException:
            self.close()
            raise

    def oldest(self, limit: int) -> Iterator[str]:
        """The `limit` oldest ids, oldest first, streamed."""
        if self._db is None:
            yield from self._sorted[: max(0, limit)]
            return
        for (cycle_id,) in self._db.execute("SELECT id FROM cycle ORDER BY id LIMIT ?", (max(0, limit),)):
            yield cycle_id

    def close(self) -> None:
        if self._db is not None:
            self._db.close()

    def __enter__(self) -> CyclesOnDisk:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def expired_cycles(
    cycles: CyclesOnDisk,
    keep_cycles: int | None = None,
    keep_days: float | None = None,
    now: _dt.datetime | None = None,
    protect: Iterable[str] = (),
) -> Iterator[str]:
    """The ids no keep rule keeps, oldest first, streamed: what `select_expired` returns, without
    holding the ids. Ids sort by time, so what expires is a prefix: the cycles before the newest
    `keep_cycles`, and of them those that started before the `keep_days` cutoff."""
    if keep_cycles is None and keep_days is None:
        return
    now = now or _dt.datetime.now(_dt.timezone.utc)
    protected = set(protect)
    limit = cycles.count if keep_cycles is None else cycles.count - keep_cycles
    cutoff = None
    if keep_days is not None:
        limit = min(limit, cycles.count - 1)  # a clock now fast, or all cycles old: the newest still stays
        try:
            cutoff = now - _dt.timedelta(days=keep_days)
        except OverflowError:  # "older than" beyond the calendar: nothing is that old
            return
    for cycle_id in cycles.oldest(limit):
        if cutoff is not None and cycle_started(cycle_id) >= cutoff:
            return  # every id after this one started no earlier
        if cycle_id not in protected:
            yield cycle_id


@dataclass
class Pruned:
    """What a prune found (and, unless a dry run, deleted): counts, never the lists themselves."""

    cycles: int = 0  # expired cycles
    kept: int = 0  # cycles on disk the rules keep
    files: int = 0  # their files (regular files, or links to one)
    bytes: int = 0
    deleted: int = 0  # files actually deleted
    removed: dict[str, list[int]] = field(default_factory=dict)  # per kind ("snapshots", "logs"): [files, bytes]

    def tally(self) -> list[tuple[Path, int, int]]:
        """What was deleted, for `update_totals(removed=...)`: one (a name of the kind, bytes, files) per kind."""
        names = {"snapshots": Path("x_before.yaml"), "logs": Path("cycle_x.log")}
        return [(names[kind], size, files) for kind, (files, size) in self.removed.items() if kind in names]


# The files that do not alone make a cycle on disk (its transcript) go first: a prune killed midway
# leaves a cycle that the next listing still sees, never a transcript no prune would find.
_DELETION_ORDER = sorted(enumerate(CYCLE_FILE_FORMS), key=lambda form: form[1][3])
_KIND = {0: "snapshots", 1: "snapshots", 2: "logs"}  # places in CYCLE_FILE_FORMS; the transcript is not counted
BATCH_CYCLES = 256  # expired cycles whose files are deleted, folder by folder at once, before the next ones


@dataclass
class _Found:
    """One of an expired cycle's files: its place in CYCLE_FILE_FORMS, its name shown, size, deleted."""

    place: int
    shown: str
    size: int
    deleted: bool


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
) -> Pruned:
    """Delete the files of the cycles no rule keeps (oldest first; at most `limit` cycles when given),
    streaming: each expired id is heard of by `on_cycle`, then each of its files that is a regular
    file (or a link to one) is sized and, unless `dry_run`, unlinked, and heard of by
    `on_file(shown path, size, deleted)`. Call while holding the lock.

    Time: one listing of each folder (names only) plus a stat and an unlink per expired file; the
    unlinks in scratchpad/ and in logs/ run at the same time, one thread each (the kernel's work of
    freeing the files is most of a prune's time, and the two folders do not wait on each other).
    Memory: bounded, whatever the cycles on disk and however many expire. Killed midway, it leaves
    the oldest cycles gone, those of at most one batch (`BATCH_CYCLES`) in part, each still listed
    (a cycle's transcript goes before its log), so the next prune finishes them; the rest whole."""
    result = Pruned()
    folders = open_folders(home)
    try:
        with CyclesOnDisk(folders) as cycles, _FolderWorkers(len(folders) if not dry_run else 1) as workers:
            expired = itertools.islice(expired_cycles(cycles, keep_cycles, keep_days, now, protect), limit)
            while batch := list(itertools.islice(expired, BATCH_CYCLES)):
                result.cycles += len(batch)
                if on_cycle is not None:
                    for cycle_id in batch:
                        on_cycle(cycle_id)
                found, failure = workers.run({where: (fd, batch, dry_run) for where, fd in folders.items()})
                for files in itertools.zip_longest(*found.values(), fillvalue=()):  # cycle by cycle, in order
                    for one in sorted(itertools.chain(*files), key=_reported_order):
                        _count(result, one, on_file)
                if failure is not None:
                    raise failure
            result.kept = cycles.count - result.cycles
    finally:
        for fd in folders.values():
            os.close(fd)
    return result


_POSITION = {place: n for n, (place, _) in enumerate(_DELETION_ORDER)}


def _reported_order(one: _Found) -> int:
    """A cycle's files are reported in the order they are deleted in (whichever folder each is in)."""
    return _POSITION[one.place]


def _prune_folder(
    where: str, folder: int, batch: list[str], dry_run: bool, found: list[list[_Found]], stop: Any = None
) -> None:
    """The batch's files in one folder (open as `folder`), cycle by cycle in `_DELETION_ORDER`: each
    regular file (or link to one, as Path.is_file says) sized and, unless `dry_run`, unlinked;
    appended to `found` (one list per cycle) as it goes, so what was deleted is known if this stops.
    Returns early, before its next cycle, once the `stop` event (when given) is set."""
    forms = [(place, prefix, suffix) for place, (w, prefix, suffix, _) in _DELETION_ORDER if w == where]
    for cycle_id in batch:
        if stop is not None and stop.is_set():
            return
        files: list[_Found] = []
        found.append(files)
        for place, prefix, suffix in forms:
            name = f"{prefix}{cycle_id}{suffix}"
            try:
                info = os.stat(name, dir_fd=folder)
            except OSError:
                continue  # not there (or gone since the listing)
            if not stat.S_ISREG(info.st_mode):
                continue
            one = _Found(place, f"{where}/{name}", info.st_size, False)
            if not dry_run:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=folder)
                    one.deleted = True
            files.append(one)


def _count(result: Pruned, one: _Found, on_file: Callable[[str, int, bool], None] | None) -> None:
    result.files += 1
    result.bytes += one.size
    if one.deleted:
        result.deleted += 1
        if one.place in _KIND:
            kind = result.removed.setdefault(_KIND[one.place], [0, 0])
            kind[0] += 1
            kind[1] += one.size
    if on_file is not None:
        on_file(one.shown, one.size, one.deleted)


class _FolderWorkers:
    """Runs `_prune_folder` for each folder: in this thread when one worker is asked for, else one
    thread per folder. `run` waits for all of them and returns what each found (up to where it
    stopped) and the first failure, if one failed. Ctrl-C while the threads delete does not raise in
    the middle of that wait (`_stop_on_sigint`): it stops the threads at their next cycle, and once
    they have stopped `run` returns a KeyboardInterrupt as the failure; so the folders stay open and
    the lock held until no thread can unlink, and a second Ctrl-C does not cut that short. A context
    manager: leaving it waits for the threads to finish."""

    def __init__(self, count: int):
        self._pool: Any = None
        if count > 1:
            import threading  # here: a dry run, or one folder, never loads these
            from concurrent.futures import ThreadPoolExecutor, wait

            self._pool, self._wait = ThreadPoolExecutor(count, thread_name_prefix="prune"), wait
            self._stop = threading.Event()

    def run(self, jobs: dict[str, tuple[int, list[str], bool]]) -> tuple[dict[str, list[list[_Found]]], Any]:
        found: dict[str, list[list[_Found]]] = {where: [] for where in jobs}
        if self._pool is None:
            try:
                for where, (fd, batch, dry_run) in jobs.items():
                    _prune_folder(where, fd, batch, dry_run, found[where])
            except Exception as exc:  # as a thread's failure is: reported after what was found
                return found, exc
            return found, None
        with _stop_on_sigint(self._stop) as heard:
            futures = [
                self._pool.submit(_prune_folder, where, *job, found[where], self._stop) for where, job in jobs.items()
            ]
            self._wait(futures)
        failures = [f.exception() for f in futures]
        interrupted = KeyboardInterrupt() if heard else None
        return found, interrupted or next((f for f in failures if f is not None), None)

    def __enter__(self) -> _FolderWorkers:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)


@contextlib.contextmanager
def _stop_on_sigint(stop: Any) -> Iterator[list[int]]:
    """Within: SIGINT (Ctrl-C) sets `stop` and is noted in the list given, instead of raising a
    KeyboardInterrupt wherever the main thread happens to be (inside a lock's bookkeeping, say).
    Only from the main thread, and only over Python's own handler: an ignored SIGINT stays ignored."""
    import signal
    import threading

    heard: list[int] = []
    own = signal.getsignal(signal.SIGINT) is signal.default_int_handler
    if threading.current_thread() is not threading.main_thread() or not own:
        yield heard
        return

    def handler(signum: int, frame: Any) -> None:
        heard.append(signum)
        stop.set()

    signal.signal(signal.SIGINT, handler)
    try:
        yield heard
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def open_folders(home: Home) -> dict[str, int]:
    """scratchpad/ and logs/ opened (those that exist), by the name CYCLE_FILE_FORMS gives them: each
    listed, and its files unlinked, through one descriptor. The caller closes them."""
    folders: dict[str, int] = {}
    for folder in (home.scratchpad, home.logs):
        try:
            folders[folder.name] = os.open(folder, _DIR_FLAGS)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except BaseException:
            for fd in folders.values():
                os.close(fd)
            raise
    return folders


@dataclass
class PrunePlan:
    """What a prune would delete (or did): cycle ids, their files and the bytes they hold."""

    remove: list[str] = field(default_factory=list)
    kept: int = 0
    files: list[Path] = field(default_factory=list)
    bytes: int = 0
    sizes: dict[Path, int] = field(default_factory=dict)  # each file's size when planned


def plan_prune(
    home: Home,
    keep_cycles: int | None = None,
    keep_days: float | None = None,
    now: _dt.datetime | None = None,
    protect: Iterable[str] = (),
    limit: int | None = None,
) -> PrunePlan:
    """Which cycles and files the rules would remove (at most `limit` cycles, oldest first); reads only.
    Holds the expired cycles' paths: for a bounded `limit`; `prune_cycles` streams any number."""
    plan = PrunePlan()

    def on_file(name: str, size: int, deleted: bool) -> None:
        path = home.root / name
        plan.files.append(path)
        plan.sizes[path] = size

    found = prune_cycles(home, keep_cycles, keep_days, now, protect, True, limit, plan.remove.append, on_file)
    plan.kept, plan.bytes = found.kept, found.bytes
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
    return plan_prune(home, settings.keep_cycles, settings.keep_days, now, protect, limit=AUTO_PRUNE_CYCLES)
