"""The built-in tools (agent/tools/builtin.py): the list the prompt shows, in order, each one's
example a call that its own schema and precheck accept and that runs. Each tool's behaviour is
tested in its own module's tests (test_files.py, test_shell.py, test_http.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.tools import TOOL_NAME
from agent.tools.builtin import TOOLS, echo
from tests.tools.helpers import ctx_for

BY_NAME = {tool.name: tool for tool in TOOLS}


def test_the_built_in_tools_in_the_order_the_prompt_lists_them():
    assert list(BY_NAME) == ["echo", "shell", "read_file", "write_file", "append_file", "list_dir", "http_get"]
    assert all(TOOL_NAME.fullmatch(name) and tool.source == "built-in" for name, tool in BY_NAME.items())
    assert {name for name, tool in BY_NAME.items() if not tool.side_effects} == {
        "echo",
        "read_file",
        "list_dir",
        "http_get",
    }
    assert {name for name, tool in BY_NAME.items() if tool.precheck is None} == {"echo"}


@pytest.mark.parametrize("name", list(BY_NAME))
def test_each_example_fits_its_own_schema_and_the_prompt_shows_it(name: str):
    tool = BY_NAME[name]
    assert tool.example and tool.check_args(tool.example) is None
    assert tool.description and "\n" not in tool.description
    assert tool.prompt_line().startswith(f"- {tool.signature()}: ") and '"tool": "' + name in tool.prompt_line()


@pytest.mark.parametrize("name", ["echo", "shell", "read_file", "write_file", "append_file", "list_dir"])
def test_each_local_example_passes_its_precheck_and_runs_in_a_workspace(tmp_path: Path, name: str):
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "input.txt").write_text("some input\n")
    ctx = ctx_for(tmp_path)
    tool = BY_NAME[name]
    assert tool.refusal(ctx, tool.example) is None
    assert isinstance(ctx.run(tool, dict(tool.example)), str)


def test_echo_returns_the_message_unchanged(tmp_path: Path):
    message = "multi\nline \x1b[31m text"  # escaping is the writers' job, not echo's
    assert echo(ctx_for(tmp_path), message) == message


def test_the_example_of_a_bad_call_is_refused_by_the_schema():
    assert BY_NAME["write_file"].check_args({"path": "x"}) == "missing required argument 'content'"
    assert BY_NAME["echo"].check_args({"message": "x", "rm": "-rf"}).startswith("unexpected argument 'rm'")
    assert "must be a string" in BY_NAME["read_file"].check_args({"path": ["a"]})
