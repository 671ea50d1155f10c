"""`agent history` and `agent status`: built from the cycle records (logs/agent.db) and the snapshots only."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agent.store.db import records
from agent.store.home import Home
from agent.store.lock import home_lock
from tests.cli.helpers import cycle_ids, done, echo, json_out, run_cycle
from tests.helpers import cycle_records, read_yaml, run_cli, wait_for, write_active, write_script

LONG_TASK = "Summarise the machine's disk use every morning and write it to report.txt"


def index_records(home: Path) -> list[dict]:
    return cycle_records(home)


# --------------------------------------------------------------------------------------- history


def test_history_lists_one_row_per_cycle_newest_first(home):
    write_active(home, {"current_task": "one", "pending_actions": ["two"]})
    assert run_cycle(home, [done("did one")]).exit_code == 0
    assert run_cycle(home, [echo("a"), echo("b")], "--max-iterations", "2").exit_code == 3
    assert run_cycle(home, []).exit_code == 4  # the script is empty: a model error
    rows = json_out(run_cli("history", "--home", str(home), "--json"))
    assert [r["stop_reason"] for r in rows] == ["error", "max_iterations", "done"]
    assert [r["iterations"] for r in rows] == [1, 2, 1]
    assert rows[-1]["task_before"] == "one" and rows[-1]["task_after"] == "two"
    assert all(r["source"] == "index" for r in rows)
    table = run_cli("history", "--home", str(home)).stdout.splitlines()
    assert table[0].split() == ["CYCLE", "STARTED", "(UTC)", "TOOK", "ITER", "STOP", "TOKENS", "COST", "TASK"]
    assert len(table) == 5 and "one -> two" in table[4] and "max_iterations" in table[3]
    assert table[2] == "  error: the script has only 0 replies and reply 1 was asked for"  # why it failed


def test_history_json_carries_every_field_of_the_index_records(worked_home):
    rows = json_out(run_cli("history", "--home", str(worked_home), "--json"))
    assert rows == [dict(record, source="index") for record in reversed(index_records(worked_home))]


def test_history_limit_keeps_the_newest(worked_home):
    rows = json_out(run_cli("history", "--home", str(worked_home), "--json", "--limit", "1"))
    assert [r["cycle_id"] for r in rows] == [cycle_ids(worked_home)[-1]]


def test_history_prints_whole_task_names_when_not_clipped_to_a_terminal(home):
    write_active(home, {"current_task": LONG_TASK})
    assert run_cycle(home, [done("wrote it")]).exit_code == 0
    out = run_cli("history", "--home", str(home)).stdout
    assert f"{LONG_TASK} -> (none)" in out


def test_history_clips_the_task_column_to_the_terminal_width(home):
    write_active(home, {"current_task": LONG_TASK, "pending_actions": [LONG_TASK.replace("morning", "evening")]})
    assert run_cycle(home, [done("wrote it")]).exit_code == 0
    lines = run_cli("history", "--home", str(home), env={"COLUMNS": "120"}).stdout.splitlines()
    assert all(len(line) <= 120 for line in lines)
    assert "Summarise the machine" in lines[1] and "…" in lines[1] and " -> " in lines[1]
    wide = run_cli("history", "--home", str(home), env={"COLUMNS": "400"}).stdout
    assert f"{LONG_TASK} -> {LONG_TASK.replace('morning', 'evening')}" in wide


def test_history_never_reads_the_cycle_logs(worked_home):
    before = json_out(run_cli("history", "--home", str(worked_home), "--json"))
    for log in (worked_home / "logs").glob("cycle_*.log"):
        log.write_text(f"00:00:00.000 cycle {log.stem[6:]} ended: error after 99 iterations, exit 4, tokens {{}}\n")
    assert json_out(run_cli("history", "--home", str(worked_home), "--json")) == before


def test_history_without_records_lists_cycles_on_disk_as_incomplete_from_their_snapshots(home):
    write_active(home, {"current_task": "one", "pending_actions": ["two"]})
    assert run_cycle(home, [echo("a"), done("did one")]).exit_code == 0
    assert run_cycle(home, [echo("b"), echo("c")], "--max-iterations", "2").exit_code == 3
    first, second = cycle_ids(home)
    db = records(Home.at(home))
    with db.write():  # the records lost (a full disk as each cycle ended)
        db.execute("UPDATE cycle SET record = NULL")
    rows = json_out(run_cli("history", "--home", str(home), "--json"))
    assert [r["cycle_id"] for r in rows] == [second, first]
    assert {r["stop_reason"] for r in rows} == {"incomplete"} and {r["source"] for r in rows} == {"snapshots"}
    assert all(r["exit_code"] is None and r["iterations"] is None and r["model"] is None for r in rows)
    assert (rows[1]["task_before"], rows[1]["task_after"]) == ("one", "two")
    assert (rows[0]["task_before"], rows[0]["task_after"]) == ("two", "two")
    assert rows[1]["started"].startswith(f"{first[:4]}-{first[4:6]}-{first[6:8]}T")


def test_history_of_an_empty_home_says_there_are_no_cycles(home):
    assert "no cycles" in run_cli("history", "--home", str(home)).stdout
    assert json_out(run_cli("history", "--home", str(home), "--json")) == []


def test_history_of_a_missing_home_is_a_usage_error(tmp_path):
    result = run_cli("history", "--home", str(tmp_path / "nowhere"))
    assert result.exit_code == 2 and "does not exist" in result.stderr


def test_odd_index_records_do_not_crash_history_or_status(home):
    assert run_cycle(home, [done("ok")]).exit_code == 0
    with open(home / "logs" / "index.jsonl", "a") as index:
        index.write('{"cycle_id": 5}\n')
        index.write('{"cycle_id": "20991231_000000", "started": "2099-12-31T00:00:00", "duration_s": "x"}\n')
    assert run_cli("history", "--home", str(home)).exit_code == 0
    assert run_cli("status", "--home", str(home)).exit_code == 0


def test_history_and_status_work_where_the_lock_cannot_be_opened(worked_home):
    (worked_home / ".agent.lock").unlink(missing_ok=True)
    (worked_home / ".agent.lock").mkdir()  # unopenable for writing, even by root (like a read-only home)
    rows = json_out(run_cli("history", "--home", str(worked_home), "--json"))
    assert [r["stop_reason"] for r in rows] == ["done", "done"]
    assert json_out(run_cli("status", "--home", str(worked_home), "--json"))["running"] is False


# ---------------------------------------------------------------------------------------- status


def test_status_reports_last_cycle_disk_use_and_model(worked_home):
    (worked_home / "config.yaml").write_text("model: openai:gpt-4o-mini\n")
    data = json_out(run_cli("status", "--home", str(worked_home), "--json"))
    assert data["running"] is False
    assert data["last_cycle"]["stop_reason"] == "done" and data["last_cycle"]["task_after"] == "three"
    assert 0 <= data["last_cycle"]["age_s"] < 600
    assert data["current_task"] == "three"
    assert data["snapshots"]["files"] == 4 and data["snapshots"]["bytes"] > 0
    assert data["logs"]["files"] == 2
    assert data["model"] == "openai:gpt-4o-mini" and data["cycles"] == 2
    out = run_cli("status", "--home", str(worked_home)).stdout
    assert "running:   no" in out and "snapshots: 4 file(s)" in out and "done (exit 0)" in out
    assert "task now:  three" in out
    # the model the last cycle used, though another one is configured now
    assert data["last_cycle"]["model"].startswith("scripted:") and " on scripted:" in out


def test_status_task_now_is_read_from_active_yaml_not_the_last_record(worked_home):
    assert run_cli("task", "drop", "0", "--home", str(worked_home)).exit_code == 0
    assert run_cli("task", "add", "four", "--home", str(worked_home)).exit_code == 0
    data = json_out(run_cli("status", "--home", str(worked_home), "--json"))
    assert data["last_cycle"]["task_after"] == "three" and data["current_task"] == "four"
    assert "task now:  four" in run_cli("status", "--home", str(worked_home)).stdout


def test_status_of_an_unreadable_active_yaml_says_the_task_is_unknown_and_why(worked_home):
    write_active(worked_home, "goals: [unclosed")
    result = run_cli("status", "--home", str(worked_home))
    assert result.exit_code == 0
    assert "task now:  unknown:" in result.stdout and "invalid YAML" in result.stdout
    data = json_out(run_cli("status", "--home", str(worked_home), "--json"))
    assert data["current_task"] is None and "invalid YAML" in data["scratchpad_error"]


def test_status_sees_a_running_cycle_and_a_broken_config(worked_home):
    (worked_home / "config.yaml").write_text("modle: x\n")
    with home_lock(Home.at(worked_home)):
        data = json_out(run_cli("status", "--home", str(worked_home), "--json"))
    assert data["running"] is True
    assert "unknown key 'modle'" in data["config_error"]


# ------------------------------------------------------------------------------ a killed cycle


@pytest.fixture
def killed_cycle(home: Path, tmp_path: Path):
    """A home whose second cycle was killed with SIGKILL mid-cycle; yields what status and
    history said while it ran, then the home."""
    write_active(home, {"current_task": "first", "pending_actions": ["slow one"]})
    assert run_cycle(home, [done("first done")]).exit_code == 0
    (home / "config.yaml").write_text("shell_policy: any\n")
    script = write_script(tmp_path, [{"tool": "shell", "args": {"command": "sleep 60"}}, done("x")], "slow.yaml")
    env = {k: v for k, v in os.environ.items() if k not in ("AGENT_HOME", "AGENT_MODEL")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent", "run", "--home", str(home), "--model", f"scripted:{script}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    try:
        wait_for(lambda: len(cycle_ids(home)) == 2)  # the before snapshot is written whole, under the lock
        while_running = (
            json_out(run_cli("status", "--home", str(home), "--json")),
            json_out(run_cli("history", "--home", str(home), "--json")),
        )
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the agent and the shell command it started
        proc.wait(timeout=30)
    yield while_running, home


def test_a_running_cycle_shows_as_running_in_status_and_history(killed_cycle):
    (status, history), home = killed_cycle
    running_id = cycle_ids(home)[1]
    assert status["running"] is True
    assert status["last_cycle"]["cycle_id"] == running_id and status["last_cycle"]["stop_reason"] == "running"
    assert history[0]["cycle_id"] == running_id and history[0]["stop_reason"] == "running"


def test_a_killed_cycle_shows_as_killed_with_its_task_from_its_before_snapshot_and_no_exit_code(killed_cycle):
    _, home = killed_cycle
    killed_id = cycle_ids(home)[1]
    rows = json_out(run_cli("history", "--home", str(home), "--json"))
    assert [r["cycle_id"] for r in rows] == [killed_id, cycle_ids(home)[0]]
    killed = rows[0]
    assert killed["stop_reason"] == "killed" and killed["exit_code"] is None and killed["source"] == "snapshots"
    assert killed["task_before"] == "slow one" and killed["task_after"] is None
    assert rows[1]["stop_reason"] == "done" and rows[1]["exit_code"] == 0
    table = run_cli("history", "--home", str(home)).stdout.splitlines()
    assert table[1].startswith(killed_id) and "killed" in table[1]
    assert table[1].rstrip().endswith("slow one") and "(none)" not in table[1]  # its task; no after to show


def test_status_after_a_kill_shows_the_killed_cycle_and_the_task_still_in_active_yaml(killed_cycle):
    _, home = killed_cycle
    data = json_out(run_cli("status", "--home", str(home), "--json"))
    assert data["running"] is False
    assert data["last_cycle"]["stop_reason"] == "killed" and data["last_cycle"]["exit_code"] is None
    assert data["last_cycle"]["age_s"] is None and data["last_cycle"]["started_age_s"] >= 0
    assert data["current_task"] == "slow one"
    out = run_cli("status", "--home", str(home)).stdout
    last = next(line for line in out.splitlines() if line.startswith("last:"))
    assert "killed (no record: it died before it saved" in last and "exit" not in last
    assert "task now:  slow one" in out and "cycles:    2 (1 without a record)" in out


def test_the_cycle_after_a_killed_one_notes_that_it_was_killed_and_records_itself(killed_cycle):
    _, home = killed_cycle
    killed_id = cycle_ids(home)[1]
    assert run_cycle(home, [done("slow one done")]).exit_code == 0
    notes = read_yaml(home / "scratchpad" / "active.yaml")["notes"]
    assert f"[CYCLE FAILED] cycle {killed_id} was killed before it saved anything" in notes
    rows = json_out(run_cli("history", "--home", str(home), "--json"))
    assert [r["stop_reason"] for r in rows] == ["done", "killed", "done"]
    assert run_cycle(home, [done("again")]).exit_code == 0  # said once: the killed cycle is no longer the newest
    assert read_yaml(home / "scratchpad" / "active.yaml")["notes"].count(killed_id) == notes.count(killed_id)
