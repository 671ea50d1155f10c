"""The shell policy in force (auto: the sandbox where a remembered probe says it works), the
workspace quota, and the allowlist's refusals that stay as the fallback. The hostile-model suite
against the sandbox itself is tests/system/test_sandbox.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agent.common.tags import Tag
from agent.config import Settings
from agent.tools.sandbox import SANDBOX_NICE, policy_in_force
from tests.helpers import remember_raw, remembered
from tests.sandbox_support import sandbox_required  # noqa: F401 - a fixture
from tests.tools.helpers import call, ctx_for


def _home(tmp_path: Path) -> Path:
    (tmp_path / "logs").mkdir()
    (tmp_path / "workspace").mkdir()
    return tmp_path


@pytest.mark.usefixtures("sandbox_required")
def test_auto_is_the_default_and_picks_the_sandbox_where_it_works_remembering_the_probe(tmp_path):
    home = _home(tmp_path)
    assert Settings().shell_policy == "auto"
    found = policy_in_force(home, Settings())
    assert found.policy == "sandbox" and found.why.startswith("auto: bubblewrap works here") and not found.warning
    memory = remembered(home, "sandbox")
    assert memory["works"] is True and memory["identity"]["bwrap"]
    # what is remembered is what counts: a record saying it failed (same bwrap, user, kernel) is believed
    memory.update(works=False, why="remembered failure")
    remember_raw(home, "sandbox", json.dumps(memory))
    assert policy_in_force(home, Settings()) == policy_in_force(home, Settings(shell_policy="auto"))
    assert policy_in_force(home, Settings()).policy == "allowlist"
    assert "remembered failure" in policy_in_force(home, Settings()).why


def test_without_bwrap_auto_falls_back_to_the_allowlist_and_says_why(tmp_path, monkeypatch):
    home = _home(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))
    found = policy_in_force(home, Settings())
    assert (found.policy, found.warning) == ("allowlist", True)
    assert "bubblewrap (bwrap) is not installed" in found.why
    kind, note = call(ctx_for(home, shell_policy="auto"), "shell", command="cat /etc/passwd")
    assert kind is Tag.TOOL_ERROR and "names a path outside the workspace" in note
    kind, note = call(ctx_for(home, shell_policy="sandbox"), "shell", command="echo hi")
    assert kind is Tag.TOOL_ERROR and "the sandbox cannot start: bubblewrap (bwrap) is not installed" in note


def test_explicit_policies_need_no_probe_and_any_carries_a_warning(tmp_path):
    home = _home(tmp_path)
    assert policy_in_force(home, Settings(shell_policy="allowlist")).why == "set in config"
    found = policy_in_force(home, Settings(shell_policy="any"))
    assert found.warning and "the operator's account" in found.why
    assert remembered(home, "sandbox") is None


@pytest.mark.usefixtures("sandbox_required")
def test_the_sandboxed_shell_runs_a_command_line_in_the_workspace(tmp_path):
    home = _home(tmp_path)
    kind, note = call(
        ctx_for(home, shell_policy="sandbox"), "shell", command="echo a b | wc -w > n.txt; cat n.txt; pwd"
    )
    assert kind is Tag.TOOL and note.endswith("-> 2; /workspace")
    assert (home / "workspace" / "n.txt").read_text() == "2\n"


@pytest.mark.usefixtures("sandbox_required")
def test_the_sandbox_runs_nicer_than_the_agent_and_cannot_take_it_back(tmp_path):
    """So on a busy machine the quota's watch keeps its share of the CPU against the command."""
    kind, note = call(ctx_for(_home(tmp_path), shell_policy="sandbox"), "shell", command="nice; renice -n 0 -p $$")
    assert kind is Tag.TOOL and f"-> {os.nice(0) + SANDBOX_NICE}; renice: " in note and "Permission denied" in note


def test_file_tools_refuse_a_write_past_the_workspace_quota_and_the_cycle_goes_on(tmp_path):
    home = _home(tmp_path)
    ctx = ctx_for(home, workspace_max_bytes=20_000, workspace_max_files=3)
    assert call(ctx, "write_file", path="a.txt", content="x" * 8000)[0] is Tag.TOOL
    kind, note = call(ctx, "write_file", path="b.txt", content="y" * 16000)
    assert kind is Tag.TOOL_ERROR and "over workspace_max_bytes (20000)" in note and "may grow" in note
    assert not (home / "workspace" / "b.txt").exists()
    assert call(ctx, "write_file", path="b.txt", content="small")[0] is Tag.TOOL
    assert call(ctx, "write_file", path="c.txt", content="small")[0] is Tag.TOOL
    kind, note = call(ctx, "write_file", path="d.txt", content="small")
    assert kind is Tag.TOOL_ERROR and "over workspace_max_files (3)" in note
    assert call(ctx, "write_file", path="c.txt", content="replaced")[0] is Tag.TOOL  # no new file


@pytest.mark.parametrize("command", ["tail +f notes.txt", "tail -n 1 +f", "head +5 notes.txt", "cat +x"])
def test_the_allowlist_refuses_an_operand_it_cannot_classify(tmp_path, command):
    home = _home(tmp_path)
    (home / "workspace" / "notes.txt").write_text("one\n")
    kind, note = call(ctx_for(home, shell_policy="allowlist"), "shell", command=command)
    assert kind is Tag.TOOL_ERROR and "is not a path the allowlist can classify" in note


def test_a_command_the_operator_added_refuses_a_plus_argument(tmp_path):
    home = _home(tmp_path)
    kind, note = call(ctx_for(home, shell_policy="allowlist", shell_allowlist=["sort"]), "shell", command="sort +1 x")
    assert kind is Tag.TOOL_ERROR and "argument '+1' is not one the allowlist can classify" in note


@pytest.mark.usefixtures("sandbox_required")
def test_a_whole_home_workspace_never_gets_the_sandbox(tmp_path):
    """`workspace: "."` would mount config.yaml, scratchpad/, logs/ and .env into the sandbox:
    auto keeps the allowlist, an explicit sandbox refuses every command, and checks cannot use it."""
    from agent.tools.sandbox import WHOLE_HOME, checks_sandbox_problem

    home = _home(tmp_path)
    (home / ".env").write_text("OPENAI_API_KEY=sk-never-shown-1234\n")
    found = policy_in_force(home, Settings(workspace="."))
    assert (found.policy, found.warning) == ("allowlist", True) and "the whole home" in found.why
    kind, note = call(ctx_for(home, workspace=".", shell_policy="auto"), "shell", command="cat .env")
    assert kind is Tag.TOOL_ERROR and "sk-never" not in note
    kind, note = call(ctx_for(home, workspace=".", shell_policy="sandbox"), "shell", command="cat .env")
    assert kind is Tag.TOOL_ERROR and "the sandbox will not run: the workspace is the whole home" in note
    assert checks_sandbox_problem(home, Settings(workspace=".")) == WHOLE_HOME
