"""Prompt assembly: a stable system message, the changing user message, the rules' examples as turns."""

from __future__ import annotations

import json
import os

import pytest

from agent.common.outcomes import UsageError
from agent.common.tags import Tag
from agent.config import Settings
from agent.cycle.prompt import (
    NOTHING_YET,
    TOOLS_MARKER,
    default_rules,
    last_result,
    next_step,
    read_rules,
    split_examples,
    system_prompt,
    user_prompt,
)
from agent.models.base import Request, chat_messages
from agent.state import fresh_state
from agent.tools import build_registry

RULES = f"""You are an agent.

{TOOLS_MARKER}

## Examples

Task: Echo hi
Last result: none yet
Action: {{"tool": "echo", "args": {{"message": "hi"}}}}

Task: Run ls
Last result: none yet
Action: {{"tool": "shell", "args": {{"command": "ls"}}}}

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


def test_examples_of_a_disabled_tool_are_left_out():
    system = system_prompt(RULES, _registry(shell_policy="off"))
    assert '"tool": "echo"' in system and '"tool": "shell"' not in system and "Be brief." in system


def test_examples_become_chat_turns_rendered_like_a_real_user_message():
    rest, turns = split_examples(RULES)
    assert "## Examples" not in rest and "Be brief." in rest
    assert [json.loads(reply)["tool"] for _, reply in turns] == ["echo", "shell"]
    assert turns[0][0] == user_prompt(fresh_state() | {"current_task": "Echo hi"}, 1, 10)
    messages = chat_messages(Request(RULES, "now", {}, examples=tuple(turns)))
    assert "## Examples" not in messages[0]["content"] and messages[0]["content"].startswith(rest.rstrip())
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert messages[-1]["content"] == "now"


def test_examples_that_do_not_parse_stay_in_the_system_text():
    rules = "Rules.\n\n## Examples\n\nsomething free-form\n"
    assert split_examples(rules) == (rules, [])
    assert split_examples("No examples.") == ("No examples.", [])


def test_the_packaged_rules_examples_all_parse():
    _, turns = split_examples(default_rules())
    assert len(turns) >= 4


def test_the_user_prompt_ends_with_the_task_the_last_result_and_one_instruction():
    state = fresh_state() | {"current_task": "Echo hi", "notes": Tag.TOOL.line("echo(...) -> hi")}
    text = user_prompt(state, 2, 5, warnings=["WARNING: careful"])
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


@pytest.mark.parametrize(
    "state, result, says",
    [
        ({}, NOTHING_YET, "There is nothing to do: call done."),
        (
            {"pending_actions": ["x"]},
            NOTHING_YET,
            "There is no current task: call done to start the next pending action.",
        ),
        ({"current_task": "t"}, NOTHING_YET, "Call the tool that does the task."),
        ({"current_task": "t"}, Tag.TOOL_ERROR.line("x"), "The last action failed"),
    ],
)
def test_next_step_follows_the_state_and_the_last_result(state, result, says):
    assert next_step(fresh_state() | state, result).startswith(says)


def test_last_result_is_the_newest_note_after_the_first_step():
    state = fresh_state() | {"notes": "old\n\n[TOOL] new\n"}
    assert last_result(state, 1) == NOTHING_YET
    assert last_result(state, 2) == "[TOOL] new"


def test_read_rules_falls_back_to_the_packaged_rules_and_refuses_a_fifo(tmp_path):
    assert read_rules(tmp_path / "rules.md") == default_rules()
    os.mkfifo(tmp_path / "fifo.md")
    with pytest.raises(UsageError, match="named pipe"):
        read_rules(tmp_path / "fifo.md")
