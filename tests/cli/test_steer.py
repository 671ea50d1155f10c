"""`agent task` and `agent goal`: queue and goal edits, under the lock, validated, atomic."""

from __future__ import annotations

import pytest
import yaml

from tests.cli.helpers import done, echo, json_out, run_cycle
from tests.helpers import read_yaml, run_cli, tree_digest, write_active


def test_task_add_list_and_drop_edit_the_queue_in_order(home):
    assert "current task is now: first" in run_cli("task", "add", "first", "--home", str(home)).stdout
    run_cli("task", "add", "second", "--home", str(home))
    assert "queued first" in run_cli("task", "add", "urgent", "--first", "--home", str(home)).stdout
    state = read_yaml(home / "scratchpad" / "active.yaml")
    assert state["current_task"] == "first" and state["pending_actions"] == ["urgent", "second"]
    listing = run_cli("task", "list", "--home", str(home)).stdout
    assert listing.splitlines() == ["current: first", "      1. urgent", "      2. second"]
    assert "dropped pending task 1: urgent" in run_cli("task", "drop", "1", "--home", str(home)).stdout
    data = json_out(run_cli("task", "drop", "0", "--home", str(home), "--json"))
    assert data["current_task"] == "second" and data["pending_actions"] == []
    assert json_out(run_cli("task", "list", "--json", "--home", str(home))) == {
        "current_task": "second",
        "pending_actions": [],
        "checks": {},
        "queued": [],
    }


def test_a_pending_task_or_a_goal_the_operator_drops_is_archived_and_listed_by_show_all(home):
    write_active(home, {"goals": ["keep", "old goal"], "current_task": "now", "pending_actions": ["a", "later"]})
    assert run_cli("task", "drop", "2", "--home", str(home)).exit_code == 0
    assert run_cli("goal", "drop", "2", "--home", str(home)).exit_code == 0
    listed = json_out(run_cli("show", "--all", "--json", "--home", str(home)))
    shown = run_cli("show", "--all", "--home", str(home)).stdout
    assert (
        "later  [cycle operator: agent task drop 2]" in shown
        and "old goal  [cycle operator: agent goal drop 2]" in shown
    )
    assert [(r["value"], r["reason"]) for r in listed["archived_queued_tasks"]] == [("later", "agent task drop 2")]
    assert [(r["value"], r["reason"]) for r in listed["archived_goals"]] == [("old goal", "agent goal drop 2")]


def test_task_edits_keep_everything_else_and_leave_no_temporaries(worked_home):
    active = worked_home / "scratchpad" / "active.yaml"
    state = read_yaml(active)
    state["operator_field"] = {"kept": True}
    active.write_text(yaml.safe_dump(state))
    assert run_cli("task", "add", "four", "--home", str(worked_home)).exit_code == 0
    after = read_yaml(active)
    assert after["pending_actions"] == ["four"]
    assert {k: v for k, v in after.items() if k != "pending_actions"} == {
        k: v for k, v in state.items() if k != "pending_actions"
    }
    assert not list((worked_home / "scratchpad").glob(".*.tmp"))


@pytest.mark.parametrize(
    "args, message",
    [
        (["task", "drop", "3"], "there is no pending task 3: they are numbered 1 to 2"),
        (["task", "add", "   "], "task text is empty"),
        (["goal", "drop", "1"], "the goal list is empty"),
    ],
)
def test_task_bad_input_is_refused_and_nothing_changes(home, args, message):
    write_active(home, {"current_task": "a", "pending_actions": ["b", "c"]})
    before = tree_digest(home)
    result = run_cli(*args, "--home", str(home))
    assert result.exit_code == 2 and message in result.stderr
    assert tree_digest(home) == before


def test_task_edit_of_an_invalid_scratchpad_exits_6_untouched(home):
    write_active(home, "current_task: [not, a, string]\n")
    before = tree_digest(home)
    result = run_cli("task", "add", "x", "--home", str(home))
    assert result.exit_code == 6 and "current_task" in result.stderr
    assert tree_digest(home) == before


def test_goal_add_list_and_drop_edit_the_goals_in_order(home):
    run_cli("goal", "add", "learn", "--home", str(home))
    run_cli("goal", "add", "teach", "--home", str(home))
    assert run_cli("goal", "list", "--home", str(home)).stdout.splitlines() == ["  1. learn", "  2. teach"]
    run_cli("goal", "drop", "1", "--home", str(home))
    assert json_out(run_cli("goal", "list", "--json", "--home", str(home))) == {"goals": ["teach"]}


def test_a_cycle_picks_up_a_task_added_from_the_cli(home):
    run_cli("task", "add", "say hi", "--home", str(home))
    assert run_cycle(home, [echo("hi"), done("said hi")]).exit_code == 0
    assert read_yaml(home / "scratchpad" / "active.yaml")["completed_tasks"] == [
        {"task": "say hi", "summary": "said hi"}
    ]
