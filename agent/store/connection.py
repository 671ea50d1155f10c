"""One open connection to logs/agent.db (`Database`), its transactions, and what an SQLite error
means (`database_error`): the piece every module of this package that reads or writes rows takes.
Opening, migrating and upgrading a home's database is db.py's, which builds on this one, as the
schema (migrations.py), the rows (rows.py) and the upgrade (upgrade.py) do.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import sqlite3
from pathlib import Path
from typing import Any, Iterator

from agent.common.files import disk_error, fault_point
from agent.common.outcomes import Busy, DiskError

BUSY_TIMEOUT_S = 30.0  # a writer waits this long for another's transaction (an upgrade's import is the longest)
_SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_CORRUPT = 5, 6, 8, 10, 11
_SQLITE_FULL, _SQLITE_CANTOPEN, _SQLITE_NOTADB, _SQLITE_PERM = 13, 14, 26, 3
_SQLITE_ERROR = 1
# What SQLite says of a schema that lacks what a statement names (a table dropped or altered by hand,
# the migration number still current), or that holds one in the way of a migration (a hand-made or
# hostile database): not a bug of ours.
_MISSHAPEN = re.compile(
    r"^(no such (table|column)|table \S+ has no column named|no such trigger|(table|index|trigger|view) \S+ already exists)"
)


class Database:
    """One open connection to a home's database. Reads (`rows`, `one`, `stream`) need no lock;
    each `write()` is one transaction, whole or not at all; a write inside a write joins it."""

    def __init__(self, connection: sqlite3.Connection, path: Path, journal: str):
        self.connection, self.path, self.journal = connection, path, journal

    def rows(self, sql: str, args: Any = ()) -> list[tuple]:
        with self.errors():
            return self.connection.execute(sql, args).fetchall()

    def one(self, sql: str, args: Any = ()) -> tuple | None:
        with self.errors():
            return self.connection.execute(sql, args).fetchone()

    def stream(self, sql: str, args: Any = (), batch: int = 256) -> Iterator[tuple]:
        """The rows of a query, a batch at a time: memory stays bounded however many there are."""
        with self.errors():
            cursor = self.connection.execute(sql, args)
            while rows := cursor.fetchmany(batch):
                yield from rows

    def execute(self, sql: str, args: Any = ()) -> sqlite3.Cursor:
        """One statement inside `write()`."""
        with self.errors():
            return self.connection.execute(sql, args)

    @contextlib.contextmanager
    def write(self) -> Iterator[Database]:
        if self.connection.in_transaction:  # a write inside a write joins it
            yield self
            return
        with self.errors():
            self.connection.execute("BEGIN IMMEDIATE")
        try:
            yield self
            fault_point("agent.db: before commit")
            with self.errors():
                self.connection.execute("COMMIT")
            fault_point("agent.db: committed")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                self.connection.execute("ROLLBACK")
            raise

    @contextlib.contextmanager
    def errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise database_error(self.path, exc) from None

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self.connection.close()


def database_error(path: Path, exc: sqlite3.Error) -> Exception:
    """The AgentError an SQLite error means for `path`; a programming error (bad SQL) stays itself."""
    code = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
    if code in (_SQLITE_BUSY, _SQLITE_LOCKED):
        return Busy(f"{path} is busy: another agent process kept it locked for {BUSY_TIMEOUT_S:g}s; try again later")
    if code in (_SQLITE_CORRUPT, _SQLITE_NOTADB) or (code == _SQLITE_ERROR and _MISSHAPEN.match(str(exc))):
        return DiskError(f"{path} is not a usable database ({exc}): move it away and restore it from a backup")
    if code in (_SQLITE_FULL, _SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_CANTOPEN, _SQLITE_PERM):
        number = _errno_of(path, code)
        return disk_error(path, OSError(number, str(exc) if number == errno.EIO else os.strerror(number)))
    return exc


def _errno_of(path: Path, code: int) -> int:
    """The errno behind an SQLite I/O error, from the file system itself (SQLite does not say)."""
    if path.is_dir():
        return errno.EISDIR
    try:
        info = os.statvfs(path.parent)
        if info.f_flag & os.ST_RDONLY:
            return errno.EROFS
        if code == _SQLITE_FULL or info.f_bavail == 0:
            return errno.ENOSPC
    except OSError as exc:
        return exc.errno or errno.EIO
    writable = os.access(path.parent, os.W_OK | os.X_OK) and (not path.exists() or os.access(path, os.R_OK | os.W_OK))
    if not writable:
        return errno.EACCES
    return errno.EROFS if code == _SQLITE_READONLY else errno.EIO


def connect(path: Path) -> sqlite3.Connection:
    try:
        return sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise database_error(path, exc) from None
