"""Acceptance checks: `agent task add TEXT --check COMMAND`. Exit 0 means the check passed; the
model can neither create, change nor dodge a check; a hanging check is bounded by its timeout."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agent.config import Settings
from agent.gates.base import Action
from agent.gates.checks import CheckGate, run_check
from agent.memory.task_checks import checked_tasks_removed
from agent.secrets import Secrets
from agent.tools import ToolContext, build_registry
from tests.cli.helpers import done, json_out, run_cycle
from tests.gates.helpers import made
from tests.helpers import read_active as active
from tests.helpers import read_yaml, run_cli, snapshots, tree_digest, write_active

HELLO_CHECK = "grep -qx hello hello.txt"


def write(path: str, content: str) -> dict:
    return {"tool": "write_file", "args": {"path": path, "content": content}}


def update(**fields) -> dict:
    return {"tool": "update_scratchpad", "args": fields}


@pytest.fixture
def checked_home(home: Path) -> Path:
    """A home whose current task carries a check, with a second (unchecked) task queued."""
    assert run_cli("task", "add", "say hello", "--check", HELLO_CHECK, "--home", str(home)).exit_code == 0
    assert run_cli("task", "add", "next", "--home", str(home)).exit_code == 0
    return home


def test_a_done_whose_check_passes_is_accepted_and_recorded_as_passed(checked_home):
    assert run_cycle(checked_home, [write("hello.txt", "hello\n"), done("wrote hello")]).exit_code == 0
    state = active(checked_home)
    assert state["completed_tasks"] == [{"task": "say hello", "summary": "wrote hello", "check": "passed"}]
    assert state["current_task"] == "next"
    assert "checks" not in state  # a check lives as long as its task is queued


def test_a_done_whose_check_fails_is_refused_with_its_output_and_the_loop_goes_on(checked_home):
    result = run_cycle(
        checked_home,
        [write("hello.txt", "goodbye\n"), done("said hello"), write("hello.txt", "hello\n"), done("really said hello")],
        "--json",
    )
    assert result.exit_code == 0
    notes = active(checked_home)["notes"].splitlines()
    assert notes[1] == f"[CHECK FAILED] done refused: the check `{HELLO_CHECK}` exit 1: (no output)"
    assert active(checked_home)["completed_tasks"] == [
        {"task": "say hello", "summary": "really said hello", "check": "passed"}
    ]


def test_a_cycle_that_never_passes_its_check_ends_without_done_and_keeps_the_task(checked_home):
    result = run_cycle(checked_home, [done("trust me")] * 3)
    assert result.exit_code == 3  # the same refused done three times: repeated_action
    state = active(checked_home)
    assert state["current_task"] == "say hello" and state["completed_tasks"] == []
    assert state["notes"].count("[CHECK FAILED]") == 3
    assert "grep: hello.txt: No such file or directory" in state["notes"]


def test_a_check_that_hangs_is_killed_at_check_timeout_and_refuses_done(home):
    (home / "config.yaml").write_text("check_timeout: 0.5\n")
    run_cli("task", "add", "hang", "--check", "sleep 30 & sleep 30", "--home", str(home))
    started = time.monotonic()
    assert run_cycle(home, [done("finished")], "--max-iterations", "1").exit_code == 3
    assert time.monotonic() - started < 15
    assert (
        "[CHECK FAILED] done refused: the check `sleep 30 & sleep 30` timed out after 0.5s and was killed"
        in active(home)["notes"]
    )


def test_a_check_runs_with_sh_in_the_workspace_outside_the_shell_policy_without_secrets(home, monkeypatch):
    (home / "config.yaml").write_text("workspace: ws\nshell_policy: 'off'\n")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-value-123")
    # in the workspace: /workspace inside the sandbox, the folder itself where no sandbox can start
    check = (
        'test "$PWD" = /workspace -o "$(basename "$PWD")" = ws && test -z "$OPENAI_API_KEY" '
        '&& echo "$((1+1))" | grep -q 2'
    )
    run_cli("task", "add", "t", "--check", check, "--home", str(home))
    assert run_cycle(home, [done("ok")]).exit_code == 0
    assert (home / "ws").is_dir()  # created for the check


def test_check_output_in_the_note_is_redacted_clipped_and_escaped(home, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-value-123")
    run_cli(
        "task",
        "add",
        "t",
        "--check",
        "printf 'sk-test-secret-value-123 \\033[31m'; seq 1000; exit 4",
        "--home",
        str(home),
    )
    assert run_cycle(home, [done("x")], "--max-iterations", "1").exit_code == 3
    note = next(line for line in active(home)["notes"].splitlines() if line.startswith("[CHECK FAILED]"))
    assert "sk-test-secret-value-123" not in note and "[REDACTED]" in note and "\x1b" not in note
    assert "exit 4" in note and len(note) < 600


def test_the_model_cannot_create_or_change_a_check(checked_home):
    frozen = active(checked_home)["checks"]
    replies = [
        update(checks={"say hello": "true"}),
        write("../scratchpad/active.yaml", "checks: {}\n"),
        write("../../home/scratchpad/active.yaml", "checks: {}\n"),
        done("x"),
    ]
    assert run_cycle(checked_home, replies, "--max-iterations", "4").exit_code == 3
    state = active(checked_home)
    assert state["checks"] == frozen and state["completed_tasks"] == []
    lines = state["notes"].splitlines()
    assert lines[0].startswith("[TOOL ERROR] update_scratchpad: unexpected argument 'checks'")
    assert lines[1].startswith("[TOOL ERROR] write_file") and lines[2].startswith("[TOOL ERROR] write_file")
    assert "outside the workspace" in lines[1] or "'..'" in lines[1]
    assert lines[3].startswith("[CHECK FAILED]")


def test_renaming_or_dropping_a_checked_task_to_dodge_its_check_is_refused(checked_home):
    replies = [
        update(current_task="something easy"),
        update(current_task="next", pending_actions=[]),
        update(pending_actions=["next"], current_task="say hello (done)"),
        done("x"),
    ]
    assert run_cycle(checked_home, replies, "--max-iterations", "4").exit_code == 3
    state = active(checked_home)
    assert state["current_task"] == "say hello" and state["pending_actions"] == ["next"]
    refusals = [line for line in state["notes"].splitlines() if "has an operator check" in line]
    assert len(refusals) == 3


def test_the_model_may_still_reorder_the_queue_behind_a_checked_task_and_finish_another(home):
    assert run_cli("task", "add", "first", "--home", str(home)).exit_code == 0
    assert run_cli("task", "add", "say hello", "--check", HELLO_CHECK, "--home", str(home)).exit_code == 0
    assert run_cli("task", "add", "next", "--home", str(home)).exit_code == 0
    replies = [update(pending_actions=["next", "say hello"]), done("did first")]
    assert run_cycle(home, replies).exit_code == 0
    state = active(home)
    assert state["completed_tasks"] == [{"task": "first", "summary": "did first"}]
    assert state["current_task"] == "next" and state["checks"] == {"say hello": HELLO_CHECK}


def test_a_checked_current_task_cannot_be_pushed_back_behind_a_task_the_model_finishes_instead(checked_home):
    """Each cycle, a task of the model's own in front and the checked one queued behind it, then done:
    without the rule every cycle is an accepted done, the check never runs and the home never stalls."""
    (checked_home / "config.yaml").write_text("stall_cycles: 2\n")
    codes = []
    for n in range(3):
        replies = [update(current_task=f"something easy {n}", pending_actions=["say hello", "next"]), done("easy")]
        codes.append(run_cycle(checked_home, replies, "--max-iterations", "2").exit_code)
    assert codes == [3, 9, 9]
    state = active(checked_home)
    assert state["current_task"] == "say hello" and state["completed_tasks"] == []
    assert "[TOOL ERROR]" in state["notes"] and "stays the current task" in state["notes"]


def test_dropping_a_checked_task_removes_its_check(checked_home):
    assert run_cli("task", "drop", "0", "--home", str(checked_home)).exit_code == 0
    assert "checks" not in active(checked_home)


def test_a_hand_broken_checks_value_fails_closed(home):
    write_active(home, {"current_task": "a", "checks": ["not", "a", "mapping"]})
    assert run_cycle(home, [done("x")], "--max-iterations", "1").exit_code == 3
    assert (
        "[CHECK FAILED] done refused: 'checks' in active.yaml must map task text to a command line"
        in active(home)["notes"]
    )
    frozen = tree_digest(home)
    result = run_cli("task", "add", "b", "--check", "true", "--home", str(home))
    assert result.exit_code == 2 and "'checks' in active.yaml" in result.stderr
    assert tree_digest(home) == frozen


@pytest.mark.parametrize(
    "args, message",
    [
        (["--check", "  "], "the check command is empty"),
        (["--check", ""], "the check command is empty"),
        (["--check"], "requires an argument"),
    ],
)
def test_task_add_with_a_bad_check_is_refused_and_nothing_changes(home, args, message):
    write_active(home, {"current_task": "a"})
    frozen = tree_digest(home)
    result = run_cli("task", "add", "--home", str(home), "b", *args)
    assert result.exit_code == 2 and message in result.stderr
    assert tree_digest(home) == frozen


def test_a_check_queued_while_a_cycle_runs_binds_at_the_next_wake(home):
    from agent.store.home import Home
    from agent.store.lock import home_lock

    write_active(home, {"current_task": None})
    with home_lock(Home.at(home)):
        run_cli("task", "add", "say hello", "--check", HELLO_CHECK, "--home", str(home))
    assert run_cycle(home, [done("x")], "--max-iterations", "1").exit_code == 3
    assert read_yaml(snapshots(home, "before")[-1])["checks"] == {"say hello": HELLO_CHECK}
    assert "[CHECK FAILED]" in active(home)["notes"]


def test_task_list_shows_each_task_s_check(checked_home):
    assert (
        run_cli("task", "list", "--home", str(checked_home)).stdout.splitlines()[0]
        == f"current: say hello  [check: {HELLO_CHECK}]"
    )
    assert json_out(run_cli("task", "list", "--json", "--home", str(checked_home)))["checks"] == {
        "say hello": HELLO_CHECK
    }


def test_run_check_reports_a_command_that_cannot_start(tmp_path):
    ctx = ToolContext(tmp_path, Settings(workspace="ws"), Secrets())
    (tmp_path / "ws").write_text("a file where the workspace should be")
    result = run_check(ctx, "true")
    assert not result.passed and result.why.startswith("could not start")


def test_checked_tasks_removed_counts_repeats():
    old = {"current_task": "a", "pending_actions": ["a", "b"], "checks": {"a": "true"}}
    assert checked_tasks_removed(old, {"current_task": "a", "pending_actions": ["b"]}) == ["a"]
    assert checked_tasks_removed(old, {"current_task": "b", "pending_actions": ["a", "a"]}) == []


def test_the_check_gate_refuses_a_dodging_update_and_a_done_until_the_check_passes(tmp_path):
    settings = Settings(workspace="ws", shell_policy="any")
    ctx, tools = ToolContext(tmp_path, settings, Secrets()), build_registry(settings, entry_points=[])
    gate = made(CheckGate, tmp_path, settings)
    state = {"current_task": "a", "pending_actions": ["b"], "checks": {"a": "test -f ok"}}
    dodge = Action(tools["update_scratchpad"], {"current_task": "b"}, ctx, after={**state, "current_task": "b"})
    assert gate.on_action(state, dodge).startswith("task 'a' has an operator check")
    reorder = {**state, "current_task": "a", "pending_actions": ["b"]}
    assert gate.on_action(state, Action(tools["update_scratchpad"], {}, ctx, after=reorder)) is None
    assert (
        gate.on_action(state, Action(tools["echo"], {"message": "hi"}, ctx)) is None
    )  # a tool's call: not its business
    finish = Action(tools["done"], {"summary": "s"}, ctx)
    assert gate.on_done(state, finish) == "done refused: the check `test -f ok` exit 1: (no output)"
    (tmp_path / "ws" / "ok").write_text("")  # the workspace the check ran in, made for it
    assert gate.on_done(state, finish) is None
    assert gate.on_done({**state, "current_task": "b"}, finish) is None  # no check for b


def test_a_done_without_a_summary_still_runs_the_check(checked_home):
    refused = run_cycle(checked_home, [{"tool": "done"}] * 3)
    assert active(checked_home)["current_task"] == "say hello" and refused.exit_code != 0
    assert "[CHECK FAILED]" in active(checked_home)["notes"]
    assert run_cycle(checked_home, [write("hello.txt", "hello\n"), {"tool": "done"}]).exit_code == 0
    assert active(checked_home)["completed_tasks"] == [
        {"task": "say hello", "summary": "Task complete.", "check": "passed"}
    ]
