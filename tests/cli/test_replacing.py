"""What `restore` and `reset` keep of the state they replace (agent/cli/replacing.py): the state,
or the raw text of one that cannot be used, and every queued edit dropped with it, archived before
active.yaml is replaced. The commands themselves are in tests/cli/test_restore.py."""

from __future__ import annotations

import os

from agent.cli.replacing import DROPPED_EDIT, REPLACED_STATE, archive_replaced, current_state
from agent.memory.inbox import queue_edit, queued_edits
from agent.memory.queue_edits import goal_add, task_add
from agent.store.archive import archived as read_archive
from tests.helpers import store_home, write_active

CYCLE = "20260101_000000_01"


def test_the_state_and_the_queued_edits_are_archived_and_the_inbox_emptied(home):
    h = store_home(home)
    write_active(home, {"current_task": "a", "goals": ["g"]})
    edits = [queue_edit(h, task_add("b")), queue_edit(h, goal_add("g2"))]
    kept = archive_replaced(h, "reset", CYCLE)
    assert kept["state"]["current_task"] == "a" and kept["edits"] == edits
    archived = list(read_archive(h))
    assert [r["kind"] for r in archived] == [REPLACED_STATE, DROPPED_EDIT, DROPPED_EDIT]
    assert archived[0]["value"] == kept["state"] and archived[0]["reason"] == "reset"
    assert [r["value"] for r in archived[1:]] == edits
    assert archived[1]["reason"] == "reset: queued for the replaced memory"
    assert all(r["cycle_id"] == CYCLE for r in archived)
    assert queued_edits(h) == [] and h.active.exists()  # the caller replaces active.yaml, not this


def test_a_state_that_cannot_be_used_is_archived_as_its_text_with_the_problem(home):
    h = store_home(home)
    write_active(home, "current_task: [broken\n\x00 not yaml")
    state, problem = current_state(h)
    assert state == "current_task: [broken\n\x00 not yaml" and problem
    archive_replaced(h, "restore 20251231_000000_01", CYCLE)
    [record] = list(read_archive(h))
    assert record["value"] == "current_task: [broken\n\x00 not yaml"
    assert record["reason"].startswith("restore 20251231_000000_01; the replaced active.yaml could not be used: ")


def test_a_scratchpad_that_cannot_even_be_read_is_named_not_archived(home):
    h = store_home(home)
    os.mkfifo(h.active)  # a FIFO where the file should be: reading it would hang
    archive_replaced(h, "reset", CYCLE)
    [record] = list(read_archive(h))
    assert record["value"] == "(not archived: is not a regular file but a named pipe (FIFO))"


def test_with_no_state_and_no_edits_nothing_is_written(home):
    h = store_home(home)
    assert current_state(h) == (None, None)
    assert archive_replaced(h, "reset", CYCLE) == {"state": None, "edits": [], "dropped_tasks": []}
    assert not h.database.exists()
