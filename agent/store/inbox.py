"""The inbox file: operator edits queued while a cycle holds the home's lock.

scratchpad/inbox.jsonl holds one JSON record per queued edit, appended whole or not at all
(`append_jsonl`), oldest first. It has its own lock, a kernel flock on the file itself, held for
milliseconds: by a command appending a record, and by whoever applies the inbox (under the home's
lock) from reading the records until it has emptied the file. So no record can be appended
between the read and the emptying and be lost. The file is emptied in place, never replaced or
unlinked: a waiting appender holds a descriptor of this very file.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
from pathlib import Path
from typing import Callable, Iterator

from agent.store.files import append_jsonl, disk_error, fault_point, read_jsonl
from agent.store.home import Home
from agent.store.lock import file_lock


def inbox_path(home: Home) -> Path:
    return home.inbox


def has_queued(home: Home) -> bool:
    """Whether the inbox may hold a record (cheap: no lock, no read)."""
    try:
        return inbox_path(home).stat().st_size > 0
    except OSError:
        return False


@contextlib.contextmanager
def inbox_lock(home: Home) -> Iterator[int]:
    """Hold the inbox's lock; yields a descriptor of the inbox file (created if missing)."""
    with file_lock(inbox_path(home)) as fd:  # holders keep it for milliseconds: just wait
        yield fd


def queue_edit(home: Home, edit: dict) -> dict:
    """Append one edit to the inbox with a fresh id and the time; returns the record written."""
    record = {
        "id": os.urandom(8).hex(),
        "queued": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        **edit,
    }
    home.ensure_dirs()
    with inbox_lock(home):
        append_jsonl(inbox_path(home), [record])
    return record


def queued_edits(home: Home) -> list[dict]:
    """The whole records in the inbox, oldest first (a torn last line is skipped)."""
    return read_jsonl(inbox_path(home), "id")


def empty_inbox(home: Home, fd: int) -> None:
    """Empty the inbox through the descriptor `inbox_lock` gave (the caller holds that lock)."""
    try:
        fault_point("inbox.jsonl: before emptying")
        os.ftruncate(fd, 0)
        os.fsync(fd)
        fault_point("inbox.jsonl: emptied")
    except OSError as exc:
        raise disk_error(inbox_path(home), exc) from exc


def discard_queued(home: Home, before_emptying: Callable[[list[dict]], None] = lambda records: None) -> list[dict]:
    """Empty the inbox; the records it held (`agent reset`: they were meant for the replaced memory).
    `before_emptying(records)` runs under the inbox's lock before the file is emptied (even when
    it holds none), so whatever it keeps of them cannot miss one appended meanwhile."""
    if not has_queued(home):
        before_emptying([])
        return []
    with inbox_lock(home) as fd:
        records = queued_edits(home)
        before_emptying(records)
        empty_inbox(home, fd)
    return records
