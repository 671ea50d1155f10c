"""`agent restore` and `agent fork`: a snapshot becomes the state again, or a new home; the
replaced state is archived, never deleted; unknown or pruned cycles exit 2 naming them."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from agent.memory.inbox import queued_edits
from agent.store.archive import archived
from agent.store.home import Home
from agent.store.lock import home_lock
from tests.cli.helpers import cycle_ids, done, json_out, run_cycle
from tests.helpers import read_active as active
from tests.helpers import read_yaml, run_cli, tree_digest, wait_for, write_active
from tests.models.openai_server import OpenAIServer, Reply


def core(state: dict) -> dict:
    return {k: v for k, v in state.items() if k != "last_updated"}


def test_restore_sets_active_to_a_cycle_s_after_snapshot_and_archives_the_replaced_state(worked_home):
    first = cycle_ids(worked_home)[0]
    replaced = active(worked_home)
    data = json_out(run_cli("restore", first, "--home", str(worked_home), "--json"))
    assert data["restored_from"] == f"scratchpad/{first}_after.yaml" and data["current_task"] == "two"
    snapshot = read_yaml(worked_home / "scratchpad" / f"{first}_after.yaml")
    assert core(active(worked_home)) == core(snapshot)
    assert active(worked_home)["last_updated"] != snapshot["last_updated"]  # stamped when saved
    [record] = [r for r in list(archived(Home.at(worked_home))) if r["kind"] == "replaced_state"]
    assert record["value"] == replaced and record["cycle_id"] == first
    assert record["reason"] == f"restore scratchpad/{first}_after.yaml"


def test_restore_names_the_queued_tasks_it_moved_to_the_archive(worked_home):
    first = cycle_ids(worked_home)[0]
    assert run_cli("task", "add", "four", "--home", str(worked_home)).exit_code == 0  # queued after that cycle
    result = run_cli("restore", first, "--home", str(worked_home))
    assert result.exit_code == 0
    assert "archived with it: the restore dropped 1 queued task: four" in result.output
    [record] = [r for r in archived(Home.at(worked_home)) if r["kind"] == "queued_task"]
    assert record["value"] == "four" and record["cycle_id"] == first
    assert active(worked_home)["pending_actions"] == ["three"]  # the restored queue: two, three


def test_restore_that_keeps_every_queued_task_names_none(worked_home):
    first = cycle_ids(worked_home)[0]
    data = json_out(run_cli("restore", f"{first}:before", "--home", str(worked_home), "--json"))
    assert data["dropped_tasks"] == []  # "three", queued now, is in the restored queue too


def test_restore_before_names_the_state_a_cycle_started_from(worked_home):
    second = cycle_ids(worked_home)[1]
    result = run_cli("restore", f"{second}:before", "--home", str(worked_home))
    assert result.exit_code == 0 and f"active.yaml is now scratchpad/{second}_before.yaml (task: two)" in result.stdout
    assert active(worked_home)["completed_tasks"] == [{"task": "one", "summary": "did one"}]
    assert run_cycle(worked_home, [done("did two again")]).exit_code == 0  # the home goes on from there


def test_restore_repairs_an_unreadable_active_yaml_and_archives_its_text(worked_home):
    write_active(worked_home, "current_task: [broken\n")
    assert run_cli("restore", "latest", "--home", str(worked_home)).exit_code == 0
    assert active(worked_home)["current_task"] == "three"
    record = list(archived(Home.at(worked_home)))[-1]
    assert record["value"] == "current_task: [broken\n" and "could not be used" in record["reason"]


def test_restore_applies_queued_edits_to_the_state_it_replaces(worked_home):
    with home_lock(Home.at(worked_home)):
        run_cli("task", "add", "queued", "--home", str(worked_home))
    run_cli("restore", "latest:before", "--home", str(worked_home))
    assert "queued" not in active(worked_home)["pending_actions"]
    replaced, dropped = list(archived(Home.at(worked_home)))[-2:]
    assert "queued" in replaced["value"]["pending_actions"] and dropped["value"] == "queued"
    assert queued_edits(Home.at(worked_home)) == []


@pytest.mark.parametrize(
    "spec, message",
    [
        ("20200101_000000", "no cycle '20200101_000000'"),
        ("{first}:during", "after the colon put before or after"),
        ("active", "name a cycle's snapshot"),
        ("../../etc/passwd", "no cycle '../../etc/passwd'"),
    ],
)
def test_restore_of_an_unknown_cycle_exits_2_naming_it_and_changes_nothing(worked_home, spec, message):
    frozen = tree_digest(worked_home)
    result = run_cli("restore", spec.format(first=cycle_ids(worked_home)[0]), "--home", str(worked_home))
    assert result.exit_code == 2 and message in result.stderr
    assert tree_digest(worked_home) == frozen


def test_restore_of_a_pruned_cycle_exits_2_naming_it(worked_home):
    first = cycle_ids(worked_home)[0]
    assert run_cli("prune", "--keep", "1", "--home", str(worked_home)).exit_code == 0
    frozen = tree_digest(worked_home)
    result = run_cli("restore", first, "--home", str(worked_home))
    assert (
        result.exit_code == 2 and f"cycle {first} has no after snapshot" in result.stderr and "pruned" in result.stderr
    )
    assert tree_digest(worked_home) == frozen


def test_restore_while_a_cycle_runs_exits_busy_and_changes_nothing(worked_home):
    frozen = tree_digest(worked_home)
    with home_lock(Home.at(worked_home)):
        result = run_cli("restore", "latest", "--home", str(worked_home))
    assert result.exit_code == 5 and tree_digest(worked_home) == frozen


@pytest.fixture
def running_cycle(worked_home):
    """(the home, the id of its cycle now running): a real `agent run` in another process, blocked
    in its model call until the test ends: its before snapshot is written, its after not yet."""
    release = threading.Event()

    def answer(request):
        release.wait(timeout=120)
        return Reply.chat({"tool": "done", "args": {"summary": "ok"}})

    with OpenAIServer(default=answer) as server:
        known = set(cycle_ids(worked_home))
        env = {k: v for k, v in os.environ.items() if k not in ("AGENT_HOME", "AGENT_MODEL")}
        command = [sys.executable, "-m", "agent", "run", "--home", str(worked_home), "--model", "openai:test-model"]
        process = subprocess.Popen([*command, "-q"], env={**env, "OPENAI_BASE_URL": server.base_url})
        try:
            started = wait_for(lambda: set(cycle_ids(worked_home)) - known, "the cycle's before snapshot")
            yield worked_home, started.pop()
        finally:
            release.set()
            process.wait(timeout=120)


@pytest.mark.parametrize("spec", ["latest", "latest:after", "latest:before"])
def test_restore_latest_while_a_cycle_runs_exits_busy_and_changes_nothing(running_cycle, spec):
    home, running = running_cycle
    frozen = tree_digest(home)
    result = run_cli("restore", spec, "--home", str(home))
    assert result.exit_code == 5, result.output
    assert result.stderr == f"agent: error: another agent process holds the lock on {home}; try again later\n"
    assert tree_digest(home) == frozen and not (home / "scratchpad" / f"{running}_after.yaml").exists()


def test_fork_and_diff_of_a_cycle_still_running_exit_busy_and_make_nothing(running_cycle, tmp_path):
    home, running = running_cycle
    for command in (("fork", "latest", str(tmp_path / "branch")), ("diff",), ("diff", running)):
        result = run_cli(*command, "--home", str(home))
        assert result.exit_code == 5, (command, result.output)
        assert f"cycle {running} is still running (it has no after snapshot yet)" in result.stderr
    assert not (tmp_path / "branch").exists()


def test_fork_starts_a_new_home_from_a_snapshot_with_this_home_s_rules_and_config(worked_home, tmp_path):
    (worked_home / "rules.md").write_text("custom rules\n")
    (worked_home / "config.yaml").write_text("max_iterations: 4\n")
    first = cycle_ids(worked_home)[0]
    target = tmp_path / "branch"
    data = json_out(run_cli("fork", first, str(target), "--home", str(worked_home), "--json"))
    assert data["home"] == str(target) and sorted(data["created"]) == [
        "config.yaml",
        "rules.md",
        "scratchpad/active.yaml",
    ]
    assert core(active(target)) == core(read_yaml(worked_home / "scratchpad" / f"{first}_after.yaml"))
    assert (target / "rules.md").read_text() == "custom rules\n"
    assert (target / "config.yaml").read_text() == "max_iterations: 4\n"
    assert run_cycle(target, [done("did two on the branch")]).exit_code == 0
    assert active(worked_home)["current_task"] == "three"  # the source home is untouched


def test_fork_carries_the_home_s_own_examples_and_none_when_it_has_none(worked_home, tmp_path):
    examples = "- task: say hi\n  action: {tool: done, args: {summary: said hi}}\n"
    first = cycle_ids(worked_home)[0]
    plain = json_out(run_cli("fork", first, str(tmp_path / "plain"), "--home", str(worked_home), "--json"))
    assert "examples.yaml" not in plain["created"] and not (tmp_path / "plain" / "examples.yaml").exists()
    (worked_home / "examples.yaml").write_text(examples)
    data = json_out(run_cli("fork", first, str(tmp_path / "own"), "--home", str(worked_home), "--json"))
    assert "examples.yaml" in data["created"] and (tmp_path / "own" / "examples.yaml").read_text() == examples
    assert run_cycle(tmp_path / "own", [done("did two on the branch")]).exit_code == 0  # and they load


def test_fork_refuses_a_home_file_a_cycle_would_refuse_and_makes_nothing(worked_home, tmp_path):
    first = cycle_ids(worked_home)[0]
    (worked_home / "examples.yaml").write_bytes(b"- task: \xff\xfe\n")  # not UTF-8
    result = run_cli("fork", first, str(tmp_path / "bad"), "--home", str(worked_home))
    assert result.exit_code == 2 and "examples.yaml" in result.stderr and "UTF-8" in result.stderr
    assert "Traceback" not in result.output + result.stderr and not (tmp_path / "bad").exists()
    (worked_home / "examples.yaml").write_bytes(b"#" * 300_000)  # past the examples file's limit
    result = run_cli("fork", first, str(tmp_path / "big"), "--home", str(worked_home))
    assert result.exit_code == 2 and "300,000 bytes, over the 262,144-byte limit" in result.stderr
    assert not (tmp_path / "big").exists()


def test_fork_into_a_home_that_already_has_a_state_exits_2(worked_home, tmp_path):
    other = tmp_path / "other"
    assert run_cli("init", str(other)).exit_code == 0
    frozen = tree_digest(other)
    result = run_cli("fork", "latest", str(other), "--home", str(worked_home))
    assert result.exit_code == 2 and "already a home with a state" in result.stderr
    assert tree_digest(other) == frozen
    same = run_cli("fork", "latest", str(worked_home), "--home", str(worked_home))
    assert same.exit_code == 2


def test_fork_of_an_unknown_cycle_exits_2_and_creates_nothing(worked_home, tmp_path):
    result = run_cli("fork", "19990101_000000:before", str(tmp_path / "never"), "--home", str(worked_home))
    assert result.exit_code == 2 and "no cycle '19990101_000000'" in result.stderr
    assert not (tmp_path / "never").exists()
