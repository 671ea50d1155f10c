"""Queue edits never block and are never lost: while a cycle holds the lock, `agent task` and
`agent goal` queue them in the inbox (logs/agent.db); the next wake applies the edits in order, once."""

from __future__ import annotations

import json
import re
import shutil
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from agent.memory.inbox import queued_edits
from agent.store.home import Home
from agent.store.lock import home_lock
from tests.cli.helpers import done, echo, json_out, run_cycle
from tests.helpers import read_active as active
from tests.helpers import read_yaml, run_agent_process, run_cli, snapshots, tree_digest, write_active


def inbox_lines(home: Path) -> list[str]:
    """The queued edits, oldest first, one JSON text each."""
    return [json.dumps(record) for record in queued_edits(Home.at(home))]


@pytest.fixture
def busy_home(home: Path):
    """A home with a task and a goal, its lock held by this test process (as a cycle would)."""
    write_active(home, {"goals": ["g1"], "current_task": "a", "pending_actions": ["b", "c"]})
    with home_lock(Home.at(home)):
        yield home


def test_edits_while_the_lock_is_held_exit_0_queued_and_leave_the_state_untouched(busy_home):
    before = active(busy_home)
    added = run_cli("task", "add", "urgent", "--first", "--home", str(busy_home))
    assert (
        added.exit_code == 0
        and "a cycle is running: queued for the next wake: task add 'urgent' (first)" in added.stdout
    )
    data = json_out(run_cli("goal", "add", "g2", "--home", str(busy_home), "--json"))
    assert data["queued"] is True and data["edit"] == {"op": "goal_add", "text": "g2"} and data["id"]
    assert run_cli("task", "drop", "2", "--wait", "0.2", "--home", str(busy_home)).exit_code == 0
    assert active(busy_home) == before
    assert len(inbox_lines(busy_home)) == 3


def test_an_edit_from_another_process_is_queued_while_this_one_holds_the_lock(busy_home):
    result = run_agent_process("task", "add", "from cron's neighbour", "--home", str(busy_home))
    assert result.returncode == 0 and "queued for the next wake" in result.stdout
    assert json.loads(inbox_lines(busy_home)[0])["text"] == "from cron's neighbour"


def test_task_list_shows_queued_edits_as_queued(busy_home):
    run_cli("task", "add", "later", "--check", "test -f later.txt", "--home", str(busy_home))
    run_cli("goal", "drop", "1", "--home", str(busy_home))
    listing = run_cli("task", "list", "--home", str(busy_home)).stdout.splitlines()
    assert listing[-2:] == [
        " queued: task add 'later' [check: test -f later.txt]  (applied at the next wake)",
        " queued: goal drop 1  (applied at the next wake)",
    ]
    queued = json_out(run_cli("task", "list", "--json", "--home", str(busy_home)))["queued"]
    assert [q["op"] for q in queued] == ["task_add", "goal_drop"]
    assert queued[0]["check"] == "test -f later.txt"


def test_the_next_cycle_applies_the_inbox_in_order_before_its_before_snapshot(home):
    write_active(home, {"goals": ["g1"], "current_task": "a", "pending_actions": ["b", "c"]})
    with home_lock(Home.at(home)):
        for args in (
            ["task", "add", "d"],
            ["task", "add", "first!", "--first"],
            ["task", "drop", "2"],
            ["goal", "add", "g2"],
            ["goal", "drop", "1"],
        ):
            assert run_cli(*args, "--home", str(home)).exit_code == 0
    assert run_cycle(home, [echo("hi"), done("did a")]).exit_code == 0
    before = read_yaml(snapshots(home, "before")[-1])
    assert before["current_task"] == "a" and before["pending_actions"] == ["first!", "c", "d"]
    assert before["goals"] == ["g2"]
    assert "inbox_applied" not in before
    assert inbox_lines(home) == []
    after = active(home)
    assert after["current_task"] == "first!" and "inbox_applied" not in after
    assert run_cycle(home, [done("did first")]).exit_code == 0  # nothing applied twice
    assert active(home)["pending_actions"] == ["d"] and active(home)["goals"] == ["g2"]


def test_an_operator_command_after_the_cycle_applies_queued_edits_then_its_own(home):
    write_active(home, {"current_task": "a", "pending_actions": []})
    with home_lock(Home.at(home)):
        run_cli("task", "add", "queued one", "--home", str(home))
    result = run_cli("task", "add", "direct", "--home", str(home))
    assert result.stdout.splitlines() == ["applied queued edit: queued (1 of 1): queued one", "queued (2 of 2): direct"]
    assert active(home)["pending_actions"] == ["queued one", "direct"]
    assert "inbox_applied" not in active(home) and inbox_lines(home) == []


def test_a_queued_edit_that_cannot_be_applied_becomes_one_inbox_note(home):
    write_active(home, {"current_task": "a", "pending_actions": ["b"]})
    with home_lock(Home.at(home)):
        assert run_cli("task", "drop", "5", "--home", str(home)).exit_code == 0
        run_cli("goal", "add", "kept", "--home", str(home))
    data = json_out(run_cli("goal", "list", "--home", str(home), "--json"))
    assert data == {"goals": []}  # listing reads, it applies nothing
    assert run_cycle(home, [done("ok")]).exit_code == 0
    notes = read_yaml(snapshots(home, "before")[-1])["notes"]
    assert notes == "[INBOX] queued edit not applied: task drop 5: there is no pending task 5: they are numbered 1 to 1"
    assert active(home)["goals"] == ["kept"]
    assert run_cycle(home, [done("ok")]).exit_code == 0
    assert active(home)["notes"].count("[INBOX]") == 1  # not retried


def test_torn_and_foreign_inbox_lines_are_skipped_or_noted_never_fatal(home):
    write_active(home, {"current_task": "a"})
    (home / "scratchpad" / "inbox.jsonl").write_text(
        '{"id": "x1", "op": "task_add", "text": "good", "first": false, "check": null}\n'
        '{"id": 7, "op": "task_add", "text": "numeric id"}\n'
        '{"id": "x2", "op": "rm -rf", "text": "?"}\n'
        '{"id": "x3", "op": "goal_drop", "number": "one"}\n'
        '{"id": "x4", "op": "task_a'
    )
    result = run_cli("goal", "add", "g", "--home", str(home), "--json")
    data = json_out(result)
    assert data["inbox_applied"] == ["queued (1 of 1): good"]
    assert len(data["inbox_refused"]) == 3 and "unknown edit 'rm -rf'" in data["inbox_refused"][1]
    assert active(home)["pending_actions"] == ["good"] and active(home)["goals"] == ["g"]
    assert inbox_lines(home) == []


def test_an_invalid_scratchpad_keeps_the_inbox_for_later(home):
    write_active(home, {"current_task": "a"})
    with home_lock(Home.at(home)):
        run_cli("task", "add", "b", "--home", str(home))
    write_active(home, "current_task: [broken\n")
    frozen = tree_digest(home)
    assert run_cli("task", "add", "c", "--home", str(home)).exit_code == 6
    assert tree_digest(home) == frozen
    write_active(home, {"current_task": "a"})
    run_cli("task", "add", "c", "--home", str(home))
    assert active(home)["pending_actions"] == ["b", "c"]


def test_many_processes_queueing_at_once_lose_no_edit(busy_home):
    with ThreadPoolExecutor(8) as pool:
        results = list(
            pool.map(lambda i: run_agent_process("task", "add", f"t{i}", "--home", str(busy_home)), range(8))
        )
    assert [r.stderr for r in results if r.returncode] == []
    assert sorted(json.loads(line)["text"] for line in inbox_lines(busy_home)) == [f"t{i}" for i in range(8)]


@pytest.mark.slow
def test_a_kill_at_any_step_of_applying_the_inbox_applies_each_edit_exactly_once(tmp_path: Path):
    """AGENT_TEST_KILL_AT=k kills `agent goal add` at its k-th write step: applying two queued edits
    (active.yaml written with the marker, the inbox emptied) and then its own. After any kill,
    the next command finds every queued edit applied exactly once."""
    base = tmp_path / "base"
    assert run_cli("init", str(base)).exit_code == 0
    with home_lock(Home.at(base)):
        run_cli("task", "add", "queued task", "--home", str(base))
        run_cli("goal", "add", "queued goal", "--home", str(base))
    steps, k = [], 0
    while True:
        k += 1
        assert k < 40
        home = tmp_path / f"kill-{k}"
        shutil.copytree(base, home)
        killed = run_agent_process(
            "goal", "add", "direct goal", "--home", str(home), env={"AGENT_TEST_KILL_AT": str(k)}
        )
        if killed.returncode == 0:
            break
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        steps.append(re.search(r"AGENT_TEST_KILL_AT: killed at (.*)", killed.stderr).group(1))
        again = run_agent_process("goal", "add", "after the kill", "--home", str(home))
        assert again.returncode == 0, again.stderr
        state = active(home)
        queue = [state["current_task"], *state["pending_actions"]]
        assert queue.count("queued task") == 1, (steps[-1], state)
        assert state["goals"].count("queued goal") == 1, (steps[-1], state)
        assert state["goals"].count("direct goal") <= 1 and state["goals"][-1] == "after the kill"
        assert "inbox_applied" not in state and inbox_lines(home) == []
        shutil.rmtree(home)
    joined = "\n".join(steps)
    for must in ("active.yaml: renamed", "inbox: before emptying", "inbox: emptied"):
        assert must in joined, steps
