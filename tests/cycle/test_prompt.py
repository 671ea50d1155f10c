"""Prompt assembly: a stable system message, the changing user message, the next step from the last Outcome."""

from __future__ import annotations

import os

import pytest

from agent.common.outcomes import UsageError
from agent.common.tags import Outcome, Tag
from agent.config import Settings
from agent.cycle.prompt import (
    NOTHING_YET,
    TOOLS_MARKER,
    default_rules,
    next_step,
    read_rules,
    system_prompt,
    user_prompt,
)
from agent.state import fresh_state
from agent.tools import build_registry

RULES = f"""You are an agent.

{TOOLS_MARKER}

## After
Be brief.
"""


def _registry(**settings):
    return build_registry(Settings(**settings), entry_points=[])


def test_the_system_prompt_lists_the_tools_where_the_marker_is_and_is_stable():
    registry = _registry()
    system = system_prompt(RULES, registry)
    assert TOOLS_MARKER not in system and registry.prompt_listing() in system
    assert system == system_prompt(RULES, registry)  # byte-identical: prompt caches hit
    assert system_prompt("Rules.", registry).endswith(f"## Tools\n\n{registry.prompt_listing()}\n")


def test_the_packaged_rules_hold_no_examples_they_are_data():
    assert "## Examples" not in default_rules() and "Task:" not in default_rules()


def test_the_user_prompt_ends_with_the_task_the_last_result_and_one_instruction():
    state = fresh_state() | {"current_task": "Echo hi", "notes": "an older note"}
    previous = Outcome(Tag.TOOL, Tag.TOOL.line("echo(...) -> hi"), "echo", {}, "hi")
    text = user_prompt(state, 2, 5, warnings=["WARNING: careful"], previous=previous)
    lines = text.splitlines()
    assert lines[-5:] == [
        "Iteration 2 of 5.",
        "Task: Echo hi",
        "Last result: [TOOL] echo(...) -> hi",
        "WARNING: careful",
        "Now: If the last result finishes the task, call done. Otherwise call the next tool.",
    ]
    assert "last_updated" not in text
    assert user_prompt(state, 5, 5).splitlines()[-1].startswith("Now: this is the LAST iteration")


def test_every_model_sees_the_whole_queue():
    state = fresh_state() | {"current_task": "A", "pending_actions": ["B", "C"]}
    assert "pending_actions:\n- B\n- C\n" in user_prompt(state, 1, 5)


def _after(tag: Tag) -> Outcome:
    return Outcome(tag, tag.line("x"), "echo", {})


@pytest.mark.parametrize(
    "state, previous, says",
    [
        ({}, None, "There is nothing to do: call done."),
        ({"pending_actions": ["x"]}, None, "There is no current task: call done to start the next pending action."),
        ({"current_task": "t"}, None, "Call the tool that does the task."),
        ({"current_task": "t"}, _after(Tag.TOOL), "If the last result finishes the task, call done."),
        ({"current_task": "t"}, _after(Tag.UPDATE), "If the last result finishes the task, call done."),
        ({"current_task": "t"}, _after(Tag.TOOL_ERROR), "The last action failed"),
        ({"current_task": "t"}, _after(Tag.PARSE_ERROR), "The last action failed"),
        ({"current_task": "t"}, _after(Tag.UNKNOWN_TOOL), "The last action failed"),
        ({"current_task": "t"}, _after(Tag.CHECK_FAILED), "The task's check failed: fix what it reports"),
    ],
)
def test_next_step_follows_the_state_and_the_tag_of_the_previous_outcome(state, previous, says):
    assert next_step(fresh_state() | state, previous).startswith(says)


def test_after_a_failed_check_the_model_is_never_told_the_last_result_may_finish_the_task():
    previous = Outcome(Tag.CHECK_FAILED, Tag.CHECK_FAILED.line("check `test -f out.txt` exited 1"), "done", {})
    text = user_prompt(fresh_state() | {"current_task": "Write out.txt"}, 2, 5, previous=previous)
    assert "Last result: [CHECK FAILED] check `test -f out.txt` exited 1" in text
    assert "If the last result finishes the task" not in text
    assert text.splitlines()[-1] == "Now: The task's check failed: fix what it reports, then call done again."


def test_every_error_tag_gets_a_failure_instruction():
    task = fresh_state() | {"current_task": "t"}
    finished = next_step(task, _after(Tag.TOOL))
    for tag in Tag:
        if tag.is_error:
            assert next_step(task, _after(tag)) != finished, tag


def test_the_first_step_shows_no_last_result_whatever_the_notes_say():
    state = fresh_state() | {"current_task": "t", "notes": "[TOOL] old -> from an earlier cycle"}
    assert f"Last result: {NOTHING_YET}" in user_prompt(state, 1, 5)


def test_read_rules_falls_back_to_the_packaged_rules_and_refuses_a_fifo(tmp_path):
    assert read_rules(tmp_path / "rules.md") == default_rules()
    os.mkfifo(tmp_path / "fifo.md")
    with pytest.raises(UsageError, match="named pipe"):
        read_rules(tmp_path / "fifo.md")
