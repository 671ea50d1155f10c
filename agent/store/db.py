"""logs/agent.db: every record of a home in one SQLite database (the standard library's sqlite3).

`records(home)` is the thread's one connection to a home's database (`Database`, connection.py),
opened on first use and migrated then (`migrations.py`); `close_all()` closes them (the CLI does
when a command ends). Every change is one transaction (`Database.write`: BEGIN IMMEDIATE, so
writers queue on SQLite's own lock for up to `BUSY_TIMEOUT_S`, never on a file lock of ours) with
synchronous writes (FULL: a commit is on disk when it returns). A reader never waits for a writer.

WAL is the journal wherever it works; on a network file system (NFS, SMB, CephFS...: some
Kubernetes volumes) its shared memory cannot work, so there the rollback journal is used
(`journal_mode`; `agent doctor` says which, and why). An SQLite error becomes the one-line error
of its kind (`database_error`, connection.py): a full or read-only disk is DiskError (exit 7)
naming the file, a writer holding the database too long Busy (exit 5), a database written by a
newer agent UsageError (exit 2).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import sqlite3
import stat
import threading
from pathlib import Path
from typing import Callable

from agent.common import file_systems
from agent.common.file_systems import file_system
from agent.common.files import SECRET_FILE_MODE, disk_error, temporary_path
from agent.common.outcomes import DiskError
from agent.store.connection import Database, connect
from agent.store.home import Home


def journal_mode(folder: Path) -> tuple[str, str]:
    """("wal" or "delete", why): WAL needs memory shared by every process that opens the database,
    which a network file system cannot give; there, the rollback journal."""
    kind = file_system(folder)
    if kind in file_systems.NETWORK:
        return "delete", f"rollback journal: {folder} is on {kind}, a network file system, where WAL cannot work"
    return "wal", f"WAL journal ({kind or 'file system unknown'})"


def open_database(path: Path, home: Home | None) -> Database:
    """Open and migrate the database at `path` of `home`, making it first when missing, and move
    an older release's files in when there are (no home: `path` is ":memory:", a database that
    lives and dies with its connection).

    A new database is built whole under a name of this process's own (owner-only, its schema and
    journal mode set), then linked into place: a link never replaces a file, so when several
    processes make it at once one wins and the others open the winner's. No two processes ever set
    up one file together, and no process sees a database without its schema."""
    from agent.store.migrations import migrate  # the schema: only where a database is opened

    made_now = home is not None and not path.exists() and _make(path, migrate)
    mode, why = journal_mode(path.parent)
    db = Database(connect(path), path, why)
    try:
        with db.errors():
            if db.connection.execute("PRAGMA journal_mode").fetchone()[0] != mode:
                db.connection.execute(f"PRAGMA journal_mode = {mode}")
            db.connection.execute("PRAGMA synchronous = FULL")
        migrate(db)
        if home is not None and (made_now or any(os.path.lexists(p) for p in home.older_release_files)):
            from agent.store.upgrade import move_in  # once: a new database, or an older release's files

            move_in(db, home)
    except BaseException:
        _close_unmade(db, made_now)
        raise
    return db


def _make(path: Path, migrate: Callable[[Database], None]) -> bool:
    """Make the database at `path` (schema and journal mode set) unless another process does first;
    True when this one did."""
    new = temporary_path(path)  # a kill leaves it to the sweep after a crash
    try:
        os.close(os.open(new, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, SECRET_FILE_MODE))
        mode, why = journal_mode(path.parent)
        db = Database(connect(new), new, why)
        try:
            with db.errors():
                db.connection.execute("PRAGMA auto_vacuum = INCREMENTAL")  # before any table: pruning gives space back
                db.connection.execute(f"PRAGMA journal_mode = {mode}")
            migrate(db)
        finally:
            db.close()  # the last connection: its WAL is folded in and removed
        os.link(new, path)
        return True
    except FileExistsError:
        return False
    except OSError as exc:
        raise disk_error(path, exc) from None
    finally:
        for leftover in (new, Path(f"{new}-wal"), Path(f"{new}-shm"), Path(f"{new}-journal")):
            leftover.unlink(missing_ok=True)


def _close_unmade(db: Database, made_now: bool) -> None:
    """Close a database whose opening failed; one made by this open with nothing committed goes too,
    so a refused upgrade leaves the home exactly as it was."""
    with contextlib.suppress(sqlite3.Error):  # nothing but the schema committed: no process wrote a record yet
        made_now = made_now and not db.connection.execute("SELECT EXISTS (SELECT 1 FROM cycle)").fetchone()[0]
    db.close()
    if made_now:
        for leftover in (db.path, Path(f"{db.path}-wal"), Path(f"{db.path}-shm")):
            leftover.unlink(missing_ok=True)


_local = threading.local()  # each thread its own connections (commands run in threads, in tests)


def _opened() -> dict[Path, tuple[int, int, Database]]:  # path -> (pid, inode, database)
    if not hasattr(_local, "opened"):
        _local.opened, _local.empty = {}, []
    return _local.opened


def records(home: Home, create: bool = True) -> Database:
    """This thread's connection to the home's database, opened and migrated on first use. Without
    `create`, a home that has no database and nothing to upgrade from gets an empty one in memory
    instead: reading a home never writes one."""
    path = home.database
    try:
        info = os.stat(path)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise disk_error(path, exc) from None
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise disk_error(path, OSError(errno.EISDIR, os.strerror(errno.EISDIR)))
    if info is not None and not stat.S_ISREG(info.st_mode):  # a FIFO would hang SQLite's first read
        raise DiskError(f"{path} is not a regular file: move it away and restore the database from a backup")
    inode = 0 if info is None else info.st_ino
    opened = _opened()
    found = opened.get(path)
    if found is not None and found[:2] == (os.getpid(), inode) and inode:
        return found[2]
    if not inode and not create and not any(os.path.lexists(p) for p in home.older_release_files):
        if not _local.empty:
            _local.empty.append(open_database(Path(":memory:"), None))
        return _local.empty[0]
    if not inode:
        home.ensure_dirs()
    if found is not None:
        found[2].close()
    db = open_database(path, home)
    opened[path] = (os.getpid(), os.stat(path).st_ino, db)
    return db


def close_all() -> None:
    """Close every database this thread opened (the last connection to close ends its WAL)."""
    opened = _opened()
    for _, _, db in opened.values():
        db.close()
    opened.clear()
    for db in _local.empty:  # the empty one in memory too: the next is made by today's migrations
        db.close()
    _local.empty.clear()


def probe(home: Home, name: str) -> dict | None:
    """A probe remembered in the database (the sandbox's, an endpoint's formats), or None."""
    found = records(home, create=False).one("SELECT record FROM probe WHERE name = ?", (name,))
    with contextlib.suppress(ValueError, TypeError):
        return json.loads(found[0]) if found else None
    return None


def remember_probe(home: Home, name: str, record: dict | None) -> None:
    """Keep (or, with None, forget) a probe; AgentError when it cannot be written."""
    db = records(home)
    with db.write():
        db.execute("DELETE FROM probe WHERE name = ?", (name,))
        if record is not None:
            db.execute("INSERT INTO probe VALUES (?, 1, ?)", (name, json.dumps(record)))


def any_rows(home: Home, table: str) -> bool:
    """Whether a table holds any row (cheap: whether to load the module that reads it)."""
    return records(home, create=False).one(f"SELECT EXISTS (SELECT 1 FROM {table})")[0] == 1


def _schema(connection: sqlite3.Connection) -> dict[str, set[str]]:
    """Each table and trigger of a database, with its columns (a trigger: none)."""
    found: dict[str, set[str]] = {}
    for kind, name in connection.execute("SELECT type, name FROM sqlite_master WHERE type IN ('table', 'trigger')"):
        if name.startswith("sqlite_"):
            continue
        columns = connection.execute(f"PRAGMA table_info({json.dumps(name)})").fetchall() if kind == "table" else []
        found[f"{kind} {name}"] = {row[1] for row in columns}
    return found


@functools.lru_cache(maxsize=1)
def expected_schema() -> dict[str, set[str]]:
    """The schema every migration makes, built once in memory: what the code reads and writes."""
    db = open_database(Path(":memory:"), None)
    try:
        return _schema(db.connection)
    finally:
        db.close()


def schema_problems(db: Database) -> list[str]:
    """What the code needs that the database lacks (a table, a column, a trigger): its number of
    migrations can be current while a table was dropped or altered by hand. Empty: usable."""
    with db.errors():
        found = _schema(db.connection)
    problems = []
    for name, columns in expected_schema().items():
        if name not in found:
            problems.append(f"no {name}")
        elif columns - found[name]:
            problems.append(f"{name} lacks column(s) {', '.join(sorted(columns - found[name]))}")
    return problems
