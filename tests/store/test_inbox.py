"""The inbox file (agent/store/inbox.py): records appended whole, read oldest first, emptied in
place under its own lock, so no record appended meanwhile is lost."""

from __future__ import annotations

import fcntl
import threading
from pathlib import Path

import pytest

from agent.store.home import Home
from agent.store.inbox import discard_queued, has_queued, inbox_lock, queue_edit, queued_edits
from tests.helpers import store_home, wait_for


def test_queued_edits_come_back_in_order_with_an_id_and_the_time(home):
    h = Home.at(home)
    assert not has_queued(h) and queued_edits(h) == []
    first = queue_edit(h, {"op": "goal_add", "text": "g"})
    second = queue_edit(h, {"op": "task_drop", "number": 1})
    assert has_queued(h) and queued_edits(h) == [first, second]
    assert first["id"] != second["id"] and len(first["id"]) == 16 and first["queued"].endswith("+00:00")
    assert h.inbox.stat().st_mode & 0o777 == 0o600


def test_a_torn_last_line_and_foreign_lines_are_skipped(home):
    h = Home.at(home)
    kept = queue_edit(h, {"op": "goal_add", "text": "kept"})
    with h.inbox.open("a") as inbox:
        inbox.write('["not", "a record"]\n{"no_id": 1}\nnot json\n{"id": "x", "op": "task_a')
    assert queued_edits(h) == [kept]
    after = queue_edit(h, {"op": "goal_add", "text": "after the tear"})  # starts a new line
    assert queued_edits(h) == [kept, after]


def test_discard_empties_the_file_in_place_and_hands_the_records_over_first(home):
    h = Home.at(home)
    records = [queue_edit(h, {"op": "goal_add", "text": str(n)}) for n in range(3)]
    inode = h.inbox.stat().st_ino
    seen: list[list[dict]] = []
    assert discard_queued(h, before_emptying=seen.append) == records
    assert seen == [records]  # called before the file was emptied
    assert h.inbox.stat().st_ino == inode and h.inbox.read_bytes() == b""  # the same file, emptied
    assert not has_queued(h)
    assert discard_queued(h, before_emptying=seen.append) == [] and seen[-1] == []  # called even when empty


def _waiters(inode: int) -> int:
    """How many flock requests on file `inode` the kernel has blocked (/proc/locks' "->" lines)."""
    lines = Path("/proc/locks").read_text().splitlines()
    return sum(1 for line in lines if " -> " in line and line.split()[-3].endswith(f":{inode}"))


def test_a_record_queued_while_the_inbox_is_being_emptied_waits_and_survives(home):
    h = Home.at(home)
    queue_edit(h, {"op": "goal_add", "text": "old"})
    threads: list[threading.Thread] = []

    def append_meanwhile(records: list[dict]) -> None:  # runs under the inbox's lock
        threads.append(threading.Thread(target=queue_edit, args=(h, {"op": "goal_add", "text": "new"})))
        threads[0].start()
        wait_for(lambda: _waiters(h.inbox.stat().st_ino), "the appender to block on the inbox's lock")

    assert [r["text"] for r in discard_queued(h, before_emptying=append_meanwhile)] == ["old"]
    threads[0].join(timeout=60)
    assert [r["text"] for r in queued_edits(h)] == ["new"]


def test_the_lock_is_a_kernel_lock_on_the_inbox_file_itself(home):
    h = store_home(home)
    with inbox_lock(h):
        with open(h.inbox, "a") as other, pytest.raises(BlockingIOError):
            fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    with open(h.inbox, "a") as other:
        fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # released with the block
