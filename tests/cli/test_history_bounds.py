"""Years of history stay fast: a cycle lists no folder and reads only the newest records, and
`history --limit N`, `status` and `diff` give what reading everything gave."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.store.cycles import new_cycle_id
from agent.store.home import Home
from agent.store.lock import home_lock
from tests.cli.helpers import done, echo, json_out, run_cycle
from tests.helpers import REPO, run_cli, write_active


def test_a_cycle_with_budgets_lists_neither_scratchpad_nor_logs(home, monkeypatch):
    """With retention off (with it on, the cycles it keeps are listed: as many as it keeps)."""
    (home / "config.yaml").write_text("keep_cycles: null\ndaily_token_budget: 1000000\nmonthly_token_budget: 9000000\n")
    write_active(home, {"current_task": "one", "pending_actions": ["two", "three"]})
    assert run_cycle(home, [done("one")]).exit_code == 0  # the first cycle of a home makes logs/agent.db
    listed = []
    real_scandir, real_listdir = os.scandir, os.listdir

    def watching(real):
        def listing(path=".", *args, **kwargs):
            named = (
                os.readlink(f"/proc/self/fd/{path}") if isinstance(path, int) else os.fsdecode(path)
            )  # by descriptor too
            listed.append(str(Path(named).absolute()))
            return real(path, *args, **kwargs)

        return listing

    monkeypatch.setattr(os, "scandir", watching(real_scandir))  # Path.glob, iterdir and os.walk use these
    monkeypatch.setattr(os, "listdir", watching(real_listdir))
    assert run_cycle(home, [echo("hi"), done("two")]).exit_code == 0
    folders = {str(home / "scratchpad"), str(home / "logs")}
    assert not [p for p in listed if p in folders], listed


def test_history_limit_and_status_match_the_whole_history_with_a_killed_cycle_in_the_middle(home):
    write_active(home, {"current_task": "one", "pending_actions": ["two", "three", "four"]})
    assert run_cycle(home, [done("one")]).exit_code == 0
    h = Home.at(home)
    with home_lock(h):  # what a cycle killed after its before snapshot leaves: no record
        killed = new_cycle_id(h, dt.datetime.now(dt.timezone.utc))
        h.snapshot(killed, "before").write_text((h.active).read_text())
    assert run_cycle(home, [done("two")]).exit_code == 0
    assert run_cycle(home, [done("three")]).exit_code == 0
    bounded = json_out(run_cli("history", "--home", str(home), "--json"))
    whole = json_out(run_cli("history", "--home", str(home), "--limit", "0", "--json"))
    assert bounded == whole and len(whole) == 4
    assert [r["source"] for r in whole] == ["index", "index", "snapshots", "index"]
    assert whole[2]["cycle_id"] == killed and whole[2]["stop_reason"] == "killed"  # a before and no after
    assert json_out(run_cli("history", "--home", str(home), "--limit", "2", "--json")) == whole[:2]
    status = json_out(run_cli("status", "--home", str(home), "--json"))
    assert status["cycles"] == 4 and status["last_cycle"]["stop_reason"] == "done"
    assert "cycles:    4 (1 without a record)" in run_cli("status", "--home", str(home)).stdout
    # the killed cycle's snapshot is counted by the cycle after it, which found it killed
    assert status["snapshots"]["files"] == 7 and status["logs"]["files"] == 3
    diff = run_cli("diff", killed, "--home", str(home))
    assert diff.exit_code == 2 and "has no after snapshot" in diff.stderr


@pytest.mark.parametrize("command", [["status"], ["history"], ["history", "--daily"], ["diff"], ["show", "--all"]])
def test_a_database_that_is_not_one_is_one_line_and_exit_7_naming_it(worked_home, command):
    (worked_home / "logs" / "agent.db").write_bytes(b"garbage " * 2000)
    result = run_cli(*command, "--home", str(worked_home))
    assert result.exit_code == 7 and "Traceback" not in result.output
    assert result.stderr.splitlines() == [
        f"agent: error: {worked_home / 'logs' / 'agent.db'} is not a usable database (file is not a database): "
        "move it away and restore it from a backup"
    ]


def test_diff_names_an_old_cycle_the_latest_and_an_unknown_one(worked_home):
    whole = json_out(run_cli("history", "--home", str(worked_home), "--limit", "0", "--json"))
    first, latest = whole[-1]["cycle_id"], whole[0]["cycle_id"]
    assert run_cli("diff", first, "--home", str(worked_home)).exit_code == 0
    assert "task: one -> two" in run_cli("diff", first, "--home", str(worked_home)).stdout
    assert "task: two -> three" in run_cli("diff", "--home", str(worked_home)).stdout
    assert (
        run_cli("diff", "latest", "--home", str(worked_home)).stdout
        == run_cli("diff", latest, "--home", str(worked_home)).stdout
    )
    unknown = run_cli("diff", "20200101_000000_01", "--home", str(worked_home))
    assert unknown.exit_code == 2 and f"latest: {first}, {latest}" in unknown.stderr


KILL_HOLDER = """
import os, signal, sys
from agent.store.home import Home
from agent.store.lock import home_lock
with home_lock(Home.at(sys.argv[1])):
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_killed_lock_holder_leaves_a_sweep_owed_until_a_cycle_sweeps(home):
    h = Home.at(home)
    h.ensure_dirs()
    with home_lock(h) as held:
        assert held.owed is False
    with home_lock(h) as held:
        assert held.owed is False  # a normal release clears its mark
    killed = subprocess.run([sys.executable, "-c", KILL_HOLDER, str(home)], cwd=REPO, capture_output=True)
    assert killed.returncode == -9
    stale = h.scratchpad / ".active.yaml.31337.deadbeef.tmp"
    stale.write_text("half")
    for _ in range(2):  # status and doctor take and drop the lock: the sweep stays owed
        with home_lock(h) as held:
            assert held.owed is True
    assert run_cycle(home, [done("ok")]).exit_code == 0
    assert not stale.exists()
    with home_lock(h) as held:
        assert held.owed is False
