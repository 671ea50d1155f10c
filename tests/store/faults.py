"""Real SQLite refusals, for the tests of what a full or read-only database does to a command.

Each makes this process's own connection to a home's database refuse writes the way SQLite refuses
them on a real full or read-only disk (the same result codes, through the same error path), with
no file system to fill or remount: `PRAGMA query_only` (SQLITE_READONLY) and `PRAGMA
max_page_count` at the pages the database has now (SQLITE_FULL as soon as it needs one more)."""

from __future__ import annotations

from agent.store.db import records
from agent.store.home import Home


def read_only(home: Home) -> None:
    """From now on, every write of this process to the home's database fails as on a read-only disk."""
    records(home).connection.execute("PRAGMA query_only = 1")


def full(home: Home) -> None:
    """From now on, every write of this process that needs a new page fails as on a full disk."""
    db = records(home)
    db.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.connection.execute(f"PRAGMA max_page_count = {db.one('PRAGMA page_count')[0]}")
    db.connection.execute("PRAGMA cache_size = 1")  # no page kept back in memory: the next write needs the disk
