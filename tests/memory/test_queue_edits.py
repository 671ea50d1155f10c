"""The operator's queue and goal edits as data (agent/memory/queue_edits.py): what each does to a
state, and a clear refusal for every edit that cannot apply (records come from the inbox file,
which anyone may have edited by hand)."""

from __future__ import annotations

import copy

import pytest

from agent.common.outcomes import UsageError
from agent.memory.queue_edits import apply_edit, describe, dropped_tasks, goal_add, goal_drop, task_add, task_drop
from agent.state import fresh_state


def state(**fields) -> dict:
    return {**fresh_state(), **fields}


def test_a_task_added_to_an_empty_queue_becomes_the_current_task():
    s = state()
    assert apply_edit(s, task_add("  write the report  ")) == "current task is now: write the report"
    assert s["current_task"] == "write the report" and s["pending_actions"] == []


def test_tasks_queue_last_or_first_with_their_position():
    s = state(current_task="a", pending_actions=["b"])
    assert apply_edit(s, task_add("c")) == "queued (2 of 2): c"
    assert apply_edit(s, task_add("first", first=True)) == "queued first (1 of 3): first"
    assert s["pending_actions"] == ["first", "b", "c"]


def test_a_task_with_a_check_records_it_and_dropping_the_task_drops_the_check():
    s = state(current_task="a")
    assert apply_edit(s, task_add("b", check="test -f b.txt")) == "queued (1 of 1): b [check: test -f b.txt]"
    assert s["checks"] == {"b": "test -f b.txt"}
    assert apply_edit(s, task_drop(1)) == "dropped pending task 1: b"
    assert "checks" not in s


def test_dropping_task_0_moves_the_queue_on():
    s = state(current_task="a", pending_actions=["b"])
    assert apply_edit(s, task_drop(0)) == "dropped current task: a; current is now: b"
    assert apply_edit(s, task_drop(0)) == "dropped current task: b; current is now: (none)"
    with pytest.raises(UsageError, match="there is no current task to drop"):
        apply_edit(s, task_drop(0))


def test_goals_are_added_and_dropped_by_number():
    s = state(goals=["g1"])
    assert apply_edit(s, goal_add("g2")) == "goal 2 added: g2"
    assert apply_edit(s, goal_drop(1)) == "dropped goal 1: g1"
    assert s["goals"] == ["g2"]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            {"op": "rm -rf /"},
            "unknown edit 'rm -rf /' (edits: task_add, task_drop, goal_add, goal_drop, memory_add, memory_drop, memory_set, resume)",
        ),
        ({}, "unknown edit None"),
        (["task_add"], "unknown edit None"),
        ({"op": "task_add", "text": "   "}, "task_add: the text is empty"),
        ({"op": "goal_add", "text": 42}, "goal_add: the text is empty"),
        ({"op": "task_add", "text": "x", "check": " "}, "the check command is empty"),
        ({"op": "task_add", "text": "x", "check": ["ls"]}, "the check command is empty"),
        ({"op": "task_drop", "number": 3}, "there is no pending task 3: they are numbered 1 to 2"),
        ({"op": "task_drop", "number": -1}, "there is no pending task -1"),
        ({"op": "task_drop", "number": True}, "there is no pending task True"),
        ({"op": "task_drop", "number": "1"}, "there is no pending task 1"),
        ({"op": "goal_drop", "number": 1}, "there is no goal 1: the goal list is empty"),
        ({"op": "goal_drop"}, "there is no goal None"),
    ],
)
def test_a_bad_edit_is_refused_with_a_message(edit, message: str):
    s = state(current_task="a", pending_actions=["b", "c"])
    before = copy.deepcopy(s)
    with pytest.raises(UsageError) as refused:
        apply_edit(s, edit)
    assert message in str(refused.value)
    assert s == before


def test_a_hand_broken_checks_value_refuses_the_edit_instead_of_crashing():
    s = state(current_task="a", checks=["not", "a", "mapping"])
    with pytest.raises(UsageError, match="'checks' in active.yaml must map task text to a command line"):
        apply_edit(s, task_add("b", check="true"))


@pytest.mark.parametrize(
    ("edit", "text"),
    [
        (task_add("X", first=True, check="test -f x"), "task add 'X' (first) [check: test -f x]"),
        (task_add("X"), "task add 'X'"),
        (task_drop(2), "task drop 2"),
        (goal_drop(1), "goal drop 1"),
        ({"text": "\n"}, "? '\\n'"),
    ],
)
def test_describe_says_an_edit_on_one_line(edit: dict, text: str):
    assert describe(edit) == text


def _queue(current, *pending) -> dict:
    return {"current_task": current, "pending_actions": list(pending)}


def test_dropped_tasks_are_those_neither_queued_nor_completed_in_the_old_order():
    before, after = _queue("a", "b", "c", "d"), _queue("c")
    assert dropped_tasks(before, after, [{"task": "a", "summary": "done"}]) == ["b", "d"]


def test_dropped_tasks_counts_duplicates_and_ignores_the_order():
    assert dropped_tasks(_queue("a", "a", "b"), _queue("b", "a")) == ["a"]
    assert dropped_tasks(_queue("a", "b"), _queue("b", "a")) == []
