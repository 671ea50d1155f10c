"""Holds: after a stall (exit 9) or a parked call (exit 8) a home calls no model until something
changes, and each kind of change lets the next cycle run.

A held cycle is run here with a model that has no replies: had it been called, the cycle would have
failed (exit 4). So exit 9 or 8 with stop reason `held` proves no model was called."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from agent.gates.holds import held_for, newest_working
from agent.memory.inbox import queue_edit, queued_edits
from agent.store.db import records
from agent.store.home import Home
from tests.cli.helpers import done, echo, run_cycle
from tests.helpers import read_active, run_cli, snapshots, write_active, write_script

WRITE = {"tool": "write_file", "args": {"path": "report.txt", "content": "hello"}}


def report_of(result) -> dict:
    return json.loads(result.stdout.splitlines()[-1])


def tick(home: Path, replies: list | None = None, *flags: str) -> dict:
    """One cron tick (`agent run --json`); with no replies, a model that fails the cycle if it is called."""
    result = run_cycle(home, replies or [], "--json", *flags)
    record = report_of(result)
    assert result.exit_code == record["exit_code"], result.output
    return record


@pytest.fixture
def stalled(home: Path) -> Path:
    """A home whose task has just stalled (stall_cycles 2, one echo per cycle)."""
    (home / "config.yaml").write_text("stall_cycles: 2\nmax_iterations: 1\n")
    write_active(home, {"current_task": "fix the build", "pending_actions": ["deploy"]})
    assert [tick(home, [echo("thinking")])["stop_reason"] for _ in range(2)] == ["max_iterations", "stalled"]
    return home


@pytest.fixture
def parked(home: Path) -> Path:
    """A home with call 1 parked for the operator."""
    (home / "config.yaml").write_text("approval_required: [write_file]\nworkspace: workspace\n")
    (home / "workspace").mkdir()
    write_active(home, {"current_task": "write the report"})
    assert tick(home, [WRITE])["stop_reason"] == "awaiting_approval"
    return home


def test_after_a_stall_each_tick_is_held_calls_no_model_and_exits_9(stalled):
    before = sorted(p.name for p in (stalled / "scratchpad").iterdir())
    for _ in range(3):
        record = tick(stalled)
        assert (record["stop_reason"], record["held_for"], record["exit_code"]) == ("held", "stalled", 9)
        assert record["iterations"] == 0 and record["usage"]["calls"] == 0
        assert "the model is not called until" in record["idle"]
    assert sorted(p.name for p in (stalled / "scratchpad").iterdir()) == before  # no snapshot pair, no state
    history = json.loads(run_cli("history", "--home", str(stalled), "--json").stdout)
    assert [r["stop_reason"] for r in history] == ["held", "held", "held", "stalled", "max_iterations"]


def test_a_parked_call_holds_each_tick_with_exit_8_until_the_operator_decides(parked):
    for _ in range(2):
        record = tick(parked)
        assert (record["stop_reason"], record["held_for"], record["exit_code"]) == ("held", "awaiting_approval", 8)
        assert "call 1 awaits the operator" in record["idle"]
    assert run_cli("approve", "1", "--home", str(parked)).exit_code == 0
    record = tick(parked, [done("written")])
    assert record["stop_reason"] == "done"
    assert (parked / "workspace" / "report.txt").read_text() == "hello"  # the approved call ran first


def test_a_denial_is_a_change_the_model_is_told_of(parked):
    assert tick(parked)["stop_reason"] == "held"
    assert run_cli("deny", "1", "--reason", "not now", "--home", str(parked)).exit_code == 0
    assert tick(parked, [done("gave up")])["stop_reason"] == "done"
    assert any(
        "denied by the operator" in line and "not now" in line for line in read_active(parked)["notes"].splitlines()
    )


def test_a_task_queued_behind_the_stalled_one_keeps_the_hold(stalled):
    assert tick(stalled)["stop_reason"] == "held"
    for task in ("look at the logs", "write it up"):
        assert run_cli("task", "add", task, "--home", str(stalled)).exit_code == 0
    record = tick(stalled)
    assert (record["stop_reason"], record["held_for"], record["waiting"]) == ("held", "stalled", 3)
    assert "held: task 'fix the build' stalled on " in record["idle"] and "; 3 tasks wait behind it;" in record["idle"]
    assert read_active(stalled)["pending_actions"] == ["deploy", "look at the logs", "write it up"]  # applied, waiting


def test_a_queued_task_dropped_keeps_the_hold(stalled):
    assert run_cli("task", "drop", "1", "--home", str(stalled)).exit_code == 0
    assert tick(stalled)["stop_reason"] == "held"


def test_dropping_the_stalled_task_lets_the_next_cycle_run(stalled):
    assert tick(stalled)["stop_reason"] == "held"
    assert run_cli("task", "drop", "0", "--home", str(stalled)).exit_code == 0
    record = tick(stalled, [done("deployed")])
    assert (record["stop_reason"], record["task_before"]) == ("done", "deploy")


@pytest.mark.parametrize("queued", [False, True], ids=["now", "through the inbox"])
def test_the_stalled_task_dropped_and_queued_again_is_a_new_task_with_a_whole_streak(stalled, queued):
    """The same text, but the operator dropped the task and queued it again: a retry, not nothing.
    Compared by its text alone it was the stalled task still, and the home stayed held."""
    write_active(stalled, dict(read_active(stalled), pending_actions=[]))
    assert tick(stalled)["stop_reason"] == "held"
    stalled_id = tick(stalled)["task_id"]
    edits = [{"op": "task_drop", "number": 0}, {"op": "task_add", "text": "fix the build", "first": False}]
    for edit in edits:
        if queued:  # as if a cycle held the lock
            queue_edit(Home.at(stalled), edit)
        else:
            assert (
                run_cli(
                    "task", edit["op"][5:], *([edit["text"]] if "text" in edit else ["0"]), "--home", str(stalled)
                ).exit_code
                == 0
            )
    record = tick(stalled, [echo("from scratch")])
    assert record["stop_reason"] == "max_iterations" and record["task_id_before"] != stalled_id
    assert tick(stalled, [echo("still")])["stop_reason"] == "stalled"
    [dropped] = [
        r for r in records(Home.at(stalled)).rows("SELECT kind, record FROM archive") if r[0] == "dropped_task"
    ]
    assert json.loads(dropped[1])["value"] == "fix the build"  # what the operator dropped is kept


def test_an_edit_of_the_stalled_task_by_hand_lets_the_next_cycle_run_with_a_whole_streak(stalled):
    write_active(stalled, dict(read_active(stalled), current_task="fix the build with the other compiler"))
    assert tick(stalled, [echo("trying")])["stop_reason"] == "max_iterations"  # a new task: its own streak
    assert tick(stalled, [echo("trying again")])["stop_reason"] == "stalled"


def test_a_goal_edit_through_the_inbox_lets_the_next_cycle_run(stalled):
    queue_edit(Home.at(stalled), {"op": "goal_add", "text": "keep the build green"})  # as if a cycle held the lock
    assert tick(stalled, [done("fixed")])["stop_reason"] == "done"


def test_a_refused_inbox_item_is_a_change_too(stalled):
    queue_edit(Home.at(stalled), {"op": "task_drop", "number": 7})  # refused: an [INBOX] note
    assert tick(stalled, [done("fixed")])["stop_reason"] == "done"


def test_an_edit_by_hand_lets_the_next_cycle_run(stalled):
    state = yaml.safe_load((stalled / "scratchpad" / "active.yaml").read_text())
    write_active(stalled, dict(state, notes=state["notes"] + "\nthe operator: try the other compiler"))
    assert tick(stalled, [done("fixed")])["stop_reason"] == "done"


def test_agent_resume_lets_the_next_cycle_run_and_gives_the_task_a_whole_streak(stalled):
    assert tick(stalled)["stop_reason"] == "held"
    result = run_cli("resume", "--home", str(stalled))
    assert result.exit_code == 0 and "the next cycle calls the model again" in result.stdout
    record = tick(stalled, [echo("again")])
    assert record["stop_reason"] == "max_iterations" and record["resumed"] is True  # not stalled at once
    assert tick(stalled, [echo("and again")])["stop_reason"] == "stalled"  # stall_cycles 2: the second
    assert tick(stalled)["stop_reason"] == "held"


def test_another_change_gives_the_task_one_more_cycle_only(stalled):
    queue_edit(Home.at(stalled), {"op": "goal_add", "text": "keep the build green"})
    assert tick(stalled, [echo("again")])["stop_reason"] == "stalled"  # the streak was not reset
    assert tick(stalled)["stop_reason"] == "held"


def test_resume_in_a_home_with_nothing_to_do_calls_no_model(home):
    (home / "config.yaml").write_text("idle: skip\n")
    assert run_cli("resume", "--home", str(home)).exit_code == 0
    script = write_script(home.parent, [], name="none.yaml")
    ran = run_cli("run", "--home", str(home), "--model", f"scripted:{script}", "--json", env={"AGENT_IDLE": "skip"})
    assert ran.exit_code == 0 and report_of(ran)["stop_reason"] == "idle"
    assert queued_edits(Home.at(home)) == []  # the resume was consumed


def test_force_is_never_held(stalled):
    assert tick(stalled, [done("fixed")], "--force")["stop_reason"] == "done"


def test_force_skips_the_hold_but_not_the_other_gates_at_wake(home):
    """Wake settles the sections of a cycle that runs: a --force cycle too (a hand-written entry is
    adopted as the operator's before the prompt shows it)."""
    (home / "config.yaml").write_text("sections: {known: {kind: list, limit: 5}}\n")
    write_active(home, {"current_task": "one", "known": ["a fact written by hand"]})
    result = run_cycle(home, [done("did one")], "--force")
    assert result.exit_code == 0, result.output
    [entry] = read_active(home)["known"]
    assert entry["text"] == "a fact written by hand" and entry["by"] == "operator" and entry["id"]


def test_held_cycles_neither_count_toward_a_stall_nor_end_its_streak(stalled):
    for _ in range(3):
        tick(stalled)
    queue_edit(Home.at(stalled), {"op": "goal_add", "text": "g"})
    assert tick(stalled, [echo("again")])["stop_reason"] == "stalled"  # the streak went on past the held ones


def test_wake_when_output_that_differs_from_the_last_wake_is_a_change(home, tmp_path):
    said = tmp_path / "said.txt"
    said.write_text("build 41 failed")
    config = {"stall_cycles": 1, "max_iterations": 1, "wake_when": ["cat", str(said)]}
    (home / "config.yaml").write_text(yaml.safe_dump(config))
    write_active(home, {"current_task": "fix the build"})
    first = tick(home, [echo("looking")])
    assert first["stop_reason"] == "stalled" and first["wake_digest"]
    held = tick(home)
    assert held["stop_reason"] == "held" and held["wake_digest"] == first["wake_digest"]  # the same output: held
    said.write_text("build 42 failed")
    assert tick(home, [done("fixed")])["stop_reason"] == "done"  # new output: the model runs


def test_a_hold_lasts_however_many_held_cycles_came_before(stalled):
    """Each held record repeats what it holds after, so the newest non-idle record is enough."""
    for _ in range(4):
        tick(stalled)
    records = json.loads(run_cli("history", "--home", str(stalled), "--json").stdout)  # newest first
    base = newest_working(records)
    assert base["stop_reason"] == "held" and held_for(base).value == "stalled"
    assert records[4]["stop_reason"] == "stalled" and base["active_digest"] == records[4]["active_digest"]


def as_an_older_release_left_it(home: Path, *fields: str) -> None:
    """The newest record without `fields` (an older release wrote none of them)."""
    paths = ", ".join(f"'$.{field}'" for field in fields)
    db = records(Home.at(home))
    with db.write():
        db.execute(
            f"UPDATE cycle SET record = json_remove(record, {paths}) "
            "WHERE id = (SELECT max(id) FROM cycle WHERE record IS NOT NULL)"
        )


def test_a_record_without_digests_is_never_held_after(stalled):
    as_an_older_release_left_it(stalled, "active_digest", "memory_digest", "task_id", "task_id_before", "streak")
    assert tick(stalled, [done("fixed")])["stop_reason"] == "done"


def test_an_older_release_s_stall_is_held_until_active_yaml_changes(stalled):
    as_an_older_release_left_it(stalled, "memory_digest", "task_id", "task_id_before", "streak")
    assert run_cli("task", "add", "look at the logs", "--home", str(stalled)).exit_code == 0
    assert tick(stalled, [done("fixed")])["stop_reason"] == "done"  # its rule: any change to the file


def test_an_older_release_s_stall_is_held_and_the_held_record_brings_the_new_rule(stalled):
    as_an_older_release_left_it(stalled, "memory_digest", "task_id", "task_id_before", "streak")
    assert tick(stalled)["stop_reason"] == "held"
    assert run_cli("task", "add", "look at the logs", "--home", str(stalled)).exit_code == 0
    assert tick(stalled)["stop_reason"] == "held"  # the held record has the digests: a queued task is no change


def test_no_snapshot_pair_log_or_transcript_for_a_held_cycle(stalled):
    pairs, logs = len(snapshots(stalled, "before")), len(list((stalled / "logs").glob("cycle_*")))
    record = tick(stalled)
    assert len(snapshots(stalled, "before")) == pairs and len(list((stalled / "logs").glob("cycle_*"))) == logs
    assert not (stalled / "logs" / f"cycle_{record['cycle_id']}.log").exists()


def test_status_says_when_the_held_task_stalled_and_what_waits_behind_it(stalled):
    assert run_cli("task", "add", "look at the logs", "--home", str(stalled)).exit_code == 0
    tick(stalled)
    out = run_cli("status", "--home", str(stalled)).stdout
    assert "held: task 'fix the build' stalled on " in out and "; 2 tasks wait behind it;" in out
    data = json.loads(run_cli("status", "--home", str(stalled), "--json").stdout)
    assert data["stall"]["waiting"] == 2 and data["stall"]["cycles"] == 2 and data["stall"]["held"].startswith("held:")


def test_a_home_with_sections_is_held_after_a_stall_until_an_agent_memory_edit(home):
    config = {"stall_cycles": 1, "max_iterations": 1, "sections": {"known": {"kind": "list", "limit": 5}}}
    (home / "config.yaml").write_text(yaml.safe_dump(config))
    write_active(home, {"current_task": "fix the build", "known": ["the build uses make"]})
    assert tick(home, [echo("looking")])["stop_reason"] == "stalled"
    assert tick(home)["stop_reason"] == "held"
    assert run_cli("memory", "add", "known", "the other compiler works", "--home", str(home)).exit_code == 0
    assert tick(home, [done("fixed")])["stop_reason"] == "done"


def test_a_reset_to_the_same_task_is_a_new_task_with_a_whole_streak(stalled):
    (stalled / "templates").mkdir()
    (stalled / "templates" / "again.yaml").write_text(yaml.safe_dump({"current_task": "fix the build"}))
    stalled_id = json.loads(run_cli("history", "--home", str(stalled), "--json", "-n", "1").stdout)[0]["task_id"]
    assert run_cli("reset", "--home", str(stalled), "--template", "again").exit_code == 0
    record = tick(stalled, [echo("from scratch")])
    assert record["stop_reason"] == "max_iterations" and record["task_id_before"] != stalled_id
    assert tick(stalled, [echo("still")])["stop_reason"] == "stalled"
