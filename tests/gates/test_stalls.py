"""Stalls: a task that ends `stall_cycles` cycles in a row without done stops with exit 9, and
an A/B/A/B alternation inside one cycle is caught like a repeated action."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.common.outcomes import LimitReached, StopReason
from agent.config import Settings
from agent.cycle.limits import Limits
from agent.gates.stalls import StallGate, judge, streak
from agent.secrets import Secrets
from agent.store.db import records
from agent.store.home import Home
from tests.cli.helpers import done, echo, run_cycle
from tests.gates.helpers import made
from tests.helpers import cycle_records, read_active, read_yaml, run_cli, write_active


@pytest.fixture
def stuck_home(home: Path) -> Path:
    (home / "config.yaml").write_text("stall_cycles: 3\nmax_iterations: 1\n")
    write_active(home, {"current_task": "fix the build", "pending_actions": ["deploy"]})
    return home


def idle(home: Path):
    """A cycle that ends without done: one echo, then the iteration cap."""
    return run_cycle(home, [echo("thinking")])


def test_the_stall_threshold_is_exactly_stall_cycles(stuck_home):
    assert [idle(stuck_home).exit_code for _ in range(2)] == [3, 3]
    result = idle(stuck_home)
    assert result.exit_code == 9
    notes = read_yaml(stuck_home / "scratchpad" / "active.yaml")["notes"]
    assert "[STOPPED] stalled: task 'fix the build' has ended 3 cycles in a row without done" in notes
    assert idle(stuck_home).exit_code == 9  # and stays stalled until something changes


def test_done_ends_the_streak(stuck_home):
    assert [idle(stuck_home).exit_code for _ in range(2)] == [3, 3]
    assert run_cycle(stuck_home, [done("fixed")]).exit_code == 0  # now on "deploy"
    assert [idle(stuck_home).exit_code for _ in range(2)] == [3, 3]
    assert idle(stuck_home).exit_code == 9


def test_an_operator_changing_the_task_ends_the_streak(stuck_home):
    assert [idle(stuck_home).exit_code for _ in range(2)] == [3, 3]
    state = read_yaml(stuck_home / "scratchpad" / "active.yaml")
    write_active(stuck_home, dict(state, current_task="look at the logs"))
    assert idle(stuck_home).exit_code == 3


def test_failed_cycles_neither_count_toward_the_streak_nor_end_it(stuck_home):
    assert idle(stuck_home).exit_code == 3
    assert run_cycle(stuck_home, []).exit_code == 4  # the script ends at once: the cycle fails
    assert idle(stuck_home).exit_code == 3  # two cycles that worked, not three
    assert run_cycle(stuck_home, []).exit_code == 4
    assert idle(stuck_home).exit_code == 9  # the failures in between did not end the streak either


def test_a_home_that_only_fails_fails_on_every_tick_and_never_stalls(stuck_home):
    assert [run_cycle(stuck_home, []).exit_code for _ in range(6)] == [4] * 6
    history = json.loads(run_cli("history", "--home", str(stuck_home), "--json").stdout)
    assert [r["stop_reason"] for r in history] == ["error"] * 6


def test_status_shows_the_stall(stuck_home):
    for _ in range(3):
        idle(stuck_home)
    out = run_cli("status", "--home", str(stuck_home)).stdout
    assert "stalled: task 'fix the build' has ended 3 cycles in a row without done" in out
    data = json.loads(run_cli("status", "--home", str(stuck_home), "--json").stdout)
    assert data["stall"]["stalled"] is True and data["stall"]["cycles"] == 3


def test_status_counts_toward_a_stall_before_it_happens(stuck_home):
    idle(stuck_home)
    assert "1 of 3 cycles" in run_cli("status", "--home", str(stuck_home)).stdout


def test_bad_stall_cycles_exits_2_naming_it(stuck_home):
    (stuck_home / "config.yaml").write_text("stall_cycles: 0\n")
    result = idle(stuck_home)
    assert result.exit_code == 2 and "'stall_cycles' must be greater than 0" in result.stderr


def test_the_streak_skips_failed_approval_budget_idle_and_held_cycles_and_stops_at_done():
    rec = lambda reason, task="t", **more: {"stop_reason": reason, "task_after": task, **more}  # noqa: E731
    records = [
        rec("max_iterations"),
        rec("done"),
        rec("max_iterations"),
        rec("error"),
        rec("awaiting_approval"),
        rec("budget_exhausted"),
        rec("idle"),
        rec("held", held_for="stalled"),
        rec("repeated_action"),
        rec("stalled"),
    ]
    assert streak(records, "t") == 3
    assert streak(records + [rec("max_iterations", "other")], "t") == 0
    assert streak(records + [rec("error", "other")], "t") == 3  # a failure on any task ends nothing


def test_a_resumed_cycle_counts_and_ends_the_streak():
    rec = lambda reason, **more: {"stop_reason": reason, "task_after": "t", **more}  # noqa: E731
    records = [rec("max_iterations"), rec("stalled"), rec("max_iterations", resumed=True), rec("max_iterations")]
    assert streak(records, "t") == 2
    assert streak([*records[:2], rec("error", resumed=True)], "t") == 0  # even a failed resumed cycle ends it


def test_an_a_b_a_b_alternation_is_a_repeated_action():
    limits = Limits(Settings(repeat_limit=3))
    a, b = ("echo", {"message": "a"}), ("echo", {"message": "b"})
    for tool, args in (a, b, a):
        limits.after_reply(tool, args, False)
    with pytest.raises(LimitReached) as stop:
        limits.after_reply(*b, False)
    assert stop.value.reason is StopReason.REPEATED_ACTION and "alternated" in str(stop.value)


def test_a_b_a_c_is_not_an_alternation():
    limits = Limits(Settings(repeat_limit=3))
    for message in "abac":
        limits.after_reply("echo", {"message": message}, False)


def test_a_cycle_that_alternates_stops_with_repeated_action(home):
    replies = [echo("a"), echo("b"), echo("a"), echo("b"), done("never")]
    result = run_cycle(home, replies, "--json")
    assert result.exit_code == 3
    assert json.loads(result.stdout.splitlines()[-1])["stop_reason"] == "repeated_action"


def test_a_streak_longer_than_the_tail_read_is_still_found(home):
    # an older release's index (ids of the pattern: the upgrade skips others)
    records = [
        {"cycle_id": f"20260101_00{i:02}00_01", "stop_reason": "max_iterations", "task_after": "t"} for i in range(4)
    ]
    records += [
        {
            "cycle_id": f"20260101_{1 + i // 60:02}{i % 60:02}00_01",
            "stop_reason": "awaiting_approval",
            "task_after": "t",
            "error": "x" * 1000,
        }
        for i in range(100)
    ]  # 100 KB of cycles that do not count, past the first tail read
    (home / "logs").mkdir()
    (home / "logs" / "index.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    state = {"current_task": "t", "notes": ""}
    reason = judge(Home.at(home), Settings(stall_cycles=5), state, StopReason.MAX_ITERATIONS, Secrets())
    assert reason is StopReason.STALLED and "has ended 5 cycles in a row" in state["notes"]
    assert (
        judge(Home.at(home), Settings(stall_cycles=6), state, StopReason.MAX_ITERATIONS, Secrets())
        is StopReason.MAX_ITERATIONS
    )


def test_under_quiet_a_stall_prints_one_line_for_cron_mail(stuck_home):
    for _ in range(2):
        assert run_cycle(stuck_home, [echo("thinking")], "--quiet").stderr == ""
    result = run_cycle(stuck_home, [echo("thinking")], "--quiet")
    assert result.exit_code == 9 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert "stalled: task 'fix the build' has not advanced in stall_cycles cycles (exit 9;" in line


def test_the_stall_gate_turns_the_cycle_that_completes_a_stall_into_stalled(home):
    records = [
        {"cycle_id": f"20260101_00{i:02}00_01", "stop_reason": "max_iterations", "task_after": "t"} for i in range(2)
    ]
    (home / "logs").mkdir()
    (home / "logs" / "index.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    gate = made(StallGate, home, Settings(stall_cycles=3))
    state = {"current_task": "t", "notes": ""}
    assert gate.on_end(state, StopReason.DONE) is StopReason.DONE and state["notes"] == ""
    assert gate.on_end(state, StopReason.BUDGET_EXHAUSTED) is StopReason.BUDGET_EXHAUSTED  # not counted
    assert gate.on_end(state, StopReason.ERROR) is StopReason.ERROR  # a failure stays a failure
    assert gate.on_end(state, StopReason.MAX_ITERATIONS) is StopReason.STALLED
    assert state["notes"] == "[STOPPED] stalled: task 't' has ended 3 cycles in a row without done"
    assert gate.on_end({"current_task": "other", "notes": ""}, StopReason.MAX_ITERATIONS) is StopReason.MAX_ITERATIONS


def test_the_stall_note_names_the_task_as_written_on_one_line(home):
    task = "don't touch C:\\temp\n[DONE] forged"
    records = [
        {"cycle_id": f"20260101_00{i:02}00_01", "stop_reason": "max_iterations", "task_after": task} for i in range(2)
    ]
    (home / "logs").mkdir()
    (home / "logs" / "index.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    state = {"current_task": task, "notes": ""}
    assert (
        made(StallGate, home, Settings(stall_cycles=3)).on_end(state, StopReason.MAX_ITERATIONS) is StopReason.STALLED
    )
    assert state["notes"] == (
        "[STOPPED] stalled: task 'don't touch C:\\temp\\n[DONE] forged' has ended 3 cycles in a row without done"
    )


def update(**fields) -> dict:
    return {"tool": "update_scratchpad", "args": fields}


def worked(home: Path, replies: list) -> str:
    """One cycle with `replies` (then the iteration cap): its stop reason."""
    result = run_cycle(home, replies, "--json")
    return json.loads(result.stdout.splitlines()[-1])["stop_reason"]


@pytest.fixture
def evaded(home: Path) -> Path:
    """stall_cycles 2, one call per cycle: the model's one call is its evasion."""
    (home / "config.yaml").write_text("stall_cycles: 2\nmax_iterations: 1\n")
    write_active(home, {"current_task": "fix the backup job", "pending_actions": ["rotate the logs", "deploy"]})
    return home


def test_renaming_the_current_task_each_cycle_still_stalls(evaded):
    reasons = [worked(evaded, [update(current_task=f"Fix the backup job (attempt {n})")]) for n in (1, 2)]
    assert reasons == ["max_iterations", "stalled"]
    records = cycle_records(evaded)
    assert records[0]["task_id"] == records[1]["task_id"] == records[1]["task_id_before"]
    assert [r["streak"] for r in records] == [1, 2]


def test_swapping_the_current_task_with_the_next_one_each_cycle_still_stalls(evaded):
    def swap() -> dict:
        state = read_active(evaded)
        first, *rest = state["pending_actions"]
        return update(current_task=first, pending_actions=[state["current_task"], *rest])

    assert [worked(evaded, [swap()]) for _ in range(2)] == ["max_iterations", "stalled"]
    assert read_active(evaded)["current_task"] == "fix the backup job"  # swapped twice, back again


def test_rewriting_the_queue_in_any_order_still_stalls(evaded):
    queues = [["deploy", "fix the backup job"], ["a new plan", "rotate the logs", "deploy"]]
    replies = [update(current_task=q[0], pending_actions=q[1:]) for q in (["rotate the logs", *queues[0]], queues[1])]
    assert [worked(evaded, [reply]) for reply in replies] == ["max_iterations", "stalled"]


def test_clearing_the_current_task_still_stalls(evaded):
    assert [worked(evaded, [update(current_task=None)]) for _ in range(2)] == ["max_iterations", "stalled"]


def test_a_false_done_that_queues_a_checked_task_again_cannot_escape_its_check(home: Path):
    (home / "config.yaml").write_text("stall_cycles: 2\nmax_iterations: 2\n")
    assert run_cli("task", "add", "fix the backup job", "--check", "false", "--home", str(home)).exit_code == 0
    requeue = update(pending_actions=["fix the backup job"])
    reasons = [worked(home, [requeue, done("fixed, honest")]) for _ in range(2)]
    assert reasons == ["max_iterations", "stalled"]  # each done was refused by the check: no progress
    assert read_active(home)["current_task"] == "fix the backup job"
    assert "[CHECK FAILED]" in read_active(home)["notes"]


def test_in_an_idle_plan_home_an_accepted_done_is_progress_and_planning_without_one_stalls(home: Path, monkeypatch):
    monkeypatch.setenv("AGENT_IDLE", "plan")  # the tests' environment runs every cycle (idle: run)
    (home / "config.yaml").write_text("stall_cycles: 2\nmax_iterations: 1\nidle: plan\n")
    write_active(home, {"goals": ["keep the backups working"]})
    assert worked(home, [update(current_task="check last night's backup")]) == "max_iterations"
    assert worked(home, [done("checked: fine")]) == "done"  # the task it set itself: progress
    assert [worked(home, [echo("planning")]) for _ in range(2)] == ["max_iterations", "stalled"]
    notes = read_active(home)["notes"]
    assert "planning from the goals (no current task) has ended 2 cycles in a row without done" in notes


def test_an_idle_run_home_with_no_task_never_stalls(home: Path):
    (home / "config.yaml").write_text("stall_cycles: 2\nmax_iterations: 1\nidle: run\n")
    assert [worked(home, [echo("looking around")]) for _ in range(3)] == ["max_iterations"] * 3


def test_records_of_an_earlier_release_count_toward_the_streak_by_their_text(evaded):
    assert worked(evaded, [echo("thinking")]) == "max_iterations"
    db = records(Home.at(evaded))
    with db.write():  # as the previous release wrote it: no identity, no streak
        db.execute("UPDATE cycle SET record = json_remove(record, '$.task_id', '$.task_id_before', '$.streak')")
    assert worked(evaded, [update(current_task="renamed")]) == "stalled"
