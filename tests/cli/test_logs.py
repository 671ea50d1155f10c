"""`agent logs [CYCLE] [-f] [--transcript]` over real homes and real cycles."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest
import yaml

from agent.cli import logs as logs_cli
from tests.cli.helpers import ANSI, cycle_ids, done, echo, run_cycle
from tests.helpers import run_cli, wait_for, write_active, write_script

STATE = {
    "goals": [],
    "current_task": "one",
    "pending_actions": [],
    "completed_tasks": [],
    "notes": "",
    "last_updated": None,
}


def test_logs_prints_the_latest_cycle_log_by_default(home):
    write_active(home, STATE)
    run_cycle(home, [done("first")])
    run_cycle(home, [echo("second cycle"), done("second")])
    first, second = cycle_ids(home)
    result = run_cli("logs", "--home", str(home))
    assert result.exit_code == 0
    assert f"cycle {second} model=" in result.stdout and "second cycle" in result.stdout
    assert first not in result.stdout
    older = run_cli("logs", first, "--home", str(home))
    assert older.exit_code == 0 and f"cycle {first} ended: done" in older.stdout


def test_logs_of_an_unknown_cycle_exits_2_naming_it(home):
    write_active(home, STATE)
    run_cycle(home, [done("ok")])
    result = run_cli("logs", "20990101_000000_01", "--home", str(home))
    assert result.exit_code == 2 and "20990101_000000_01" in result.stderr


def test_logs_of_an_empty_home_and_of_a_pruned_cycle_exit_2(home):
    assert run_cli("logs", "--home", str(home)).exit_code == 2
    write_active(home, STATE)
    for _ in range(2):
        run_cycle(home, [done("ok")])
    first = cycle_ids(home)[0]
    assert run_cli("prune", "--home", str(home), "--keep", "1").exit_code == 0
    result = run_cli("logs", first, "--home", str(home))  # still in the index, its files gone
    assert result.exit_code == 2 and "pruned" in result.stderr


def test_logs_escapes_control_characters_even_in_a_hand_written_log(home):
    write_active(home, STATE)
    run_cycle(home, [done("ok")])
    (cycle_id,) = cycle_ids(home)
    log = home / "logs" / f"cycle_{cycle_id}.log"
    log.write_text(log.read_text() + "forged \x1b[2J\x1b]52;c;ZXZpbA==\x07 line\n")
    result = run_cli("logs", "--home", str(home))
    assert ANSI not in result.stdout and "\x07" not in result.stdout and "\\x1b[2J" in result.stdout


def test_logs_transcript_prints_every_message_and_reply_escaped(home):
    write_active(home, STATE)
    run_cycle(home, ["hostile \x1b[31m reply", done("ok")])
    result = run_cli("logs", "--home", str(home), "--transcript")
    assert result.exit_code == 0
    assert "=== call 1 (action)" in result.stdout and "=== call 2 (action)" in result.stdout
    assert "--- system" in result.stdout and "--- user" in result.stdout
    assert "hostile \\x1b[31m reply" in result.stdout and ANSI not in result.stdout
    as_json = run_cli("logs", "--home", str(home), "--transcript", "--json")
    records = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [r["call"] for r in records] == [1, 2] and records[0]["reply"] == "hostile \x1b[31m reply"
    assert ANSI not in as_json.stdout


def test_logs_json_without_transcript_is_a_usage_error(home):
    write_active(home, STATE)
    run_cycle(home, [done("ok")])
    result = run_cli("logs", "--home", str(home), "--json")
    assert result.exit_code == 2 and "--transcript" in result.stderr


def test_logs_follow_of_a_finished_cycle_prints_it_and_returns(home):
    write_active(home, STATE)
    run_cycle(home, [done("ok")])
    result = run_cli("logs", "-f", "--home", str(home))
    assert result.exit_code == 0 and "ended: done" in result.stdout


@pytest.mark.slow
def test_logs_follow_prints_a_running_cycles_lines_and_exits_when_it_ends(home):
    """A real cycle blocks in a shell tool (`cat` on a FIFO the test holds); `agent logs -f`
    prints what is written so far, keeps following, and exits once the cycle has ended."""
    write_active(home, STATE)
    (home / "config.yaml").write_text(yaml.safe_dump({"shell_timeout": 120}))
    gate = home / "workspace" / "gate.fifo"  # the shell runs in the workspace
    gate.parent.mkdir()
    os.mkfifo(gate)
    script = write_script(home.parent, [{"tool": "shell", "args": {"command": "cat gate.fifo"}}, done("ok")])
    env = {k: v for k, v in os.environ.items() if k not in ("AGENT_HOME", "AGENT_MODEL")}
    agent = [sys.executable, "-m", "agent"]
    cycle = subprocess.Popen([*agent, "run", "--home", str(home), "--model", f"scripted:{script}", "-q"], env=env)
    follower = None
    try:
        logs_dir = home / "logs"
        wait_for(
            lambda: (
                any("iteration 1: reply" in p.read_text() for p in logs_dir.glob("cycle_*.log"))
                if logs_dir.is_dir()
                else False
            ),
            what="the cycle to reach its shell command",
        )
        follower = subprocess.Popen(
            [*agent, "logs", "-f", "--home", str(home)], env=env, stdout=subprocess.PIPE, text=True
        )
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(follower.stdout), daemon=True)
        reader.start()
        wait_for(lambda: any("iteration 1: reply" in line for line in lines), what="the follower's first lines")
        assert follower.poll() is None  # the cycle still runs, so it still follows
        with open(gate, "w") as fifo:
            fifo.write("released by the test\n")
        assert cycle.wait(timeout=60) == 0
        assert follower.wait(timeout=60) == 0
        reader.join(timeout=10)
        output = "".join(lines)
        assert "[TOOL] shell" in output and "released by the test" in output
        assert "ended: done" in output.splitlines()[-1]
    finally:
        for process in (cycle, follower):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()


def test_logs_of_a_cycle_with_its_log_reads_no_index_and_lists_no_folder(home, monkeypatch):
    """`agent logs` and `agent logs ID` cost the same at any history: the id's log is looked up by name."""
    write_active(home, STATE)
    run_cycle(home, [done("first")])
    run_cycle(home, [echo("second cycle"), done("second")])
    first, second = cycle_ids(home)

    def whole_history(*args):
        raise AssertionError("read more than the newest id: history or a listing")

    monkeypatch.setattr(logs_cli, "recent_history", whole_history)
    monkeypatch.setattr(os, "scandir", whole_history)
    monkeypatch.setattr(os, "listdir", whole_history)
    assert f"cycle {second} model=" in run_cli("logs", "--home", str(home)).stdout
    assert f"cycle {first} ended: done" in run_cli("logs", first, "--home", str(home)).stdout
