"""Applying the inbox (agent/memory/inbox.py): queued edits applied in order, once, each refused
one an [INBOX] note; the state saved with the applied ids before the inbox is emptied. The commands
and the cycle that call it are in tests/cli/test_inbox.py."""

from __future__ import annotations

import subprocess
import sys

import pytest

import agent.memory.inbox as inbox
from agent.common.outcomes import DiskError
from agent.memory.inbox import APPLIED_KEY, apply_inbox, discard_queued, queue_edit, queued_edits, without_marker
from agent.memory.queue_edits import goal_add, task_add, task_drop
from agent.scratchpad import MAX_SCRATCHPAD_BYTES, read_state_file
from agent.state import fresh_state
from agent.store.db import any_rows, records
from tests.helpers import store_home, tree_digest


def test_nothing_queued_writes_nothing_and_drops_the_marker(home):
    h = store_home(home)
    state = {**fresh_state(), APPLIED_KEY: ["old"]}
    result = apply_inbox(h, state)
    assert result.state == fresh_state() and result.messages == [] and result.refused == []
    assert not h.active.exists()


def test_queued_edits_are_applied_in_order_saved_with_their_ids_and_the_inbox_emptied(home):
    h = store_home(home)
    ids = [queue_edit(h, edit)["id"] for edit in (task_add("a"), task_add("b"), goal_add("g"), task_drop(0))]
    result = apply_inbox(h, fresh_state())
    assert result.messages == [
        "current task is now: a",
        "queued (1 of 1): b",
        "goal 1 added: g",
        "dropped current task: a; current is now: b",
    ]
    assert result.state["current_task"] == "b" and result.state["goals"] == ["g"]
    assert APPLIED_KEY not in result.state
    saved = read_state_file(h.active, h.root)
    assert saved[APPLIED_KEY] == ids and without_marker(saved) == result.state
    assert queued_edits(h) == [] and not any_rows(h, "inbox")


def test_records_the_state_already_names_are_skipped_never_applied_twice(home):
    h = store_home(home)
    done = queue_edit(h, task_add("applied before the kill"))
    fresh = queue_edit(h, task_add("new"))
    state = {**fresh_state(), "current_task": "applied before the kill", APPLIED_KEY: [done["id"], 7, None]}
    result = apply_inbox(h, state)
    assert result.state["current_task"] == "applied before the kill" and result.state["pending_actions"] == ["new"]
    assert read_state_file(h.active, h.root)[APPLIED_KEY] == [fresh["id"]]


def test_only_already_applied_records_empty_the_inbox_without_a_write(home):
    h = store_home(home)
    done = queue_edit(h, goal_add("g"))
    apply_inbox(h, {**fresh_state(), "goals": ["g"], APPLIED_KEY: [done["id"]]})
    assert not h.active.exists() and queued_edits(h) == []


def test_hostile_records_become_inbox_notes_and_the_good_ones_still_apply(home):
    h = store_home(home)
    db = records(h)
    with db.write():  # records written by hand (sqlite3) or by a broken version
        for text in (
            '{"id": 7, "op": "task_add", "text": "numeric id"}',
            '{"id": "x1", "op": "\\u001b[2Jrm", "text": "?"}',
            '{"id": "x2", "op": "task_add", "text": "good"}',
            '{"id": "x3", "op": "goal_drop", "number": 9}',
        ):
            db.execute("INSERT INTO inbox (format, record) VALUES (1, ?)", (text,))
    result = apply_inbox(h, fresh_state())
    assert result.messages == ["current task is now: good"]
    assert [note.split(": ", 2)[2] for note in result.refused] == [
        "the record's id is not text",
        "unknown edit '\\x1b[2Jrm' (edits: task_add, task_drop, goal_add, goal_drop, memory_add, memory_drop, memory_set, resume)",
        "there is no goal 9: the goal list is empty",
    ]
    notes = result.state["notes"].split("\n")
    assert len(notes) == 3 and all(n.startswith("[INBOX] queued edit not applied: ") for n in notes)
    assert "\x1b" not in result.state["notes"]  # a terminal reading the notes obeys nothing
    assert read_state_file(h.active, h.root)[APPLIED_KEY] == ["x1", "x2", "x3"]


def test_an_edit_that_would_make_the_state_too_large_is_refused_and_the_rest_kept(home):
    h = store_home(home)
    queue_edit(h, goal_add("x" * (MAX_SCRATCHPAD_BYTES + 10)))
    queue_edit(h, goal_add("small"))
    result = apply_inbox(h, fresh_state())
    assert result.state["goals"] == ["small"]
    assert "over the 4,194,304-byte limit" in result.refused[0] and len(result.refused[0]) < 400


def test_a_state_that_cannot_be_saved_keeps_every_queued_record(home):
    h = store_home(home)
    queue_edit(h, goal_add("g"))
    h.active.mkdir()  # a folder where active.yaml goes: the save fails
    frozen = tree_digest(home)
    with pytest.raises(DiskError):
        apply_inbox(h, fresh_state())
    assert tree_digest(home) == frozen and [r["text"] for r in queued_edits(h)] == ["g"]


def test_discarding_hands_the_records_over_before_they_go(home):
    h = store_home(home)
    for text in ("a", "b"):
        queue_edit(h, task_add(text))
    seen = []
    dropped = discard_queued(h, before_emptying=seen.append)
    assert [r["text"] for r in dropped] == ["a", "b"] and seen == [dropped]
    assert queued_edits(h) == []
    assert discard_queued(h, before_emptying=seen.append) == [] and seen[-1] == []  # told even when none


def test_an_edit_queued_while_the_inbox_is_applied_survives_for_the_next_wake(home):
    """The inbox is read and emptied in one write transaction, and only the records read are
    deleted: an edit another process queues meanwhile waits on SQLite's lock or lands after them,
    and is never lost between the read and the delete."""
    h = store_home(home)
    queue_edit(h, task_add("first"))
    code = (
        "import sys; from agent.store.home import Home; from agent.memory.inbox import queue_edit; "
        "from agent.memory.queue_edits import task_add; print('ready', flush=True); "
        "queue_edit(Home.at(sys.argv[1]), task_add('meanwhile'))"
    )
    real_queued, other = inbox.queued_edits, []

    def queued_then_another_arrives(home, *upto):
        found = real_queued(home, *upto)
        if not other:  # the apply has read the inbox: another process queues now
            other.append(subprocess.Popen([sys.executable, "-c", code, str(h.root)], stdout=subprocess.PIPE, text=True))
            assert other[0].stdout.readline() == "ready\n"
        return found

    inbox.queued_edits = queued_then_another_arrives
    try:
        result = apply_inbox(h, fresh_state())
    finally:
        inbox.queued_edits = real_queued
    assert other[0].wait(timeout=60) == 0
    assert result.state["current_task"] == "first"
    assert [r["text"] for r in queued_edits(h)] == ["meanwhile"]
