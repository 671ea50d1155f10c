"""The cycle table's columns (migration m004_cycle_columns): the record's fields people filter and
sort by, as VIRTUAL generated columns, so a home the previous release wrote has them for every old
cycle the moment it is upgraded, a kill -9 during the upgrade leaves a home the next command
finishes upgrading, and the common questions are answered by an index."""

from __future__ import annotations

import re
import signal
import sqlite3
from pathlib import Path

import pytest

from agent.store import migrations
from tests.helpers import run_agent_process, run_cli
from tests.store import lived_in
from tests.store.lived_in import COLUMNS_MIGRATION, lived_in_home

THIS = COLUMNS_MIGRATION  # the migrations before it: the previous release
NAMES = [name for name, _, _ in migrations.CYCLE_COLUMNS]


def previous_release_home(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = lived_in.previous_release_home(folder, monkeypatch)
    assert version(home) == THIS
    return home


def version(home: Path) -> int:
    with sqlite3.connect(home / "logs" / "agent.db") as connection:
        return connection.execute("PRAGMA user_version").fetchone()[0]


def columns_and_records(home: Path) -> list[tuple[dict, dict]]:
    """(the columns, the record as JSON read by sqlite3 itself) of every recorded cycle."""
    connection = sqlite3.connect(f"file:{home / 'logs' / 'agent.db'}?mode=ro", uri=True)
    connection.row_factory = sqlite3.Row
    found = []
    for row in connection.execute("SELECT * FROM cycle WHERE record IS NOT NULL ORDER BY id"):
        fields = {
            name: connection.execute("SELECT json_extract(?, ?)", (row["record"], f"$.{name}")).fetchone()[0]
            for name in NAMES
            if name != "ended"
        }
        found.append(({name: row[name] for name in NAMES}, fields))
    connection.close()
    return found


def test_an_upgraded_home_has_the_columns_filled_for_the_cycles_the_previous_release_recorded(tmp_path, monkeypatch):
    home = previous_release_home(tmp_path, monkeypatch)
    assert run_cli("status", "--home", str(home)).exit_code == 0  # the first command upgrades it
    assert version(home) == len(migrations.MIGRATIONS)
    found = columns_and_records(home)
    assert [columns["stop_reason"] for columns, _ in found] == ["done", "max_iterations", "error", "idle"]
    for columns, fields in found:
        assert {name: columns[name] for name in fields} == fields
        assert columns["ended"] > columns["started"][:19]
    failed = found[2][0]
    assert failed["exit_code"] == 4 and "refused" in failed["error"].lower() or "connect" in failed["error"].lower()


def test_the_end_is_the_start_plus_the_duration_in_utc():
    connection = sqlite3.connect(":memory:")
    connection.execute("CREATE TABLE cycle (id TEXT PRIMARY KEY, record TEXT)")
    for name, kind, expression in migrations.CYCLE_COLUMNS:
        connection.execute(f"ALTER TABLE cycle ADD COLUMN {name} {kind} GENERATED ALWAYS AS ({expression}) VIRTUAL")
    connection.execute(
        "INSERT INTO cycle (id, record) VALUES ('a', ?)",
        ('{"started": "2026-11-27T21:09:39+01:00", "duration_s": 61.25}',),
    )
    assert connection.execute("SELECT ended FROM cycle").fetchone()[0] == "2026-11-27T20:10:40.250+00:00"


@pytest.mark.parametrize(
    "record", ["not json", "[1, 2]", '{"cycle_id": "ID", "stop_reason": 7, "started": "yesterday"}']
)
def test_a_record_a_hand_edit_broke_reads_as_empty_columns_and_every_command_still_works(tmp_path, record):
    home = lived_in_home(tmp_path)
    with sqlite3.connect(home / "logs" / "agent.db") as connection:
        newest = connection.execute("SELECT max(id) FROM cycle").fetchone()[0]
        connection.execute("UPDATE cycle SET record = ? WHERE id = ?", (record.replace("ID", newest), newest))
        row = connection.execute(f"SELECT {', '.join(NAMES)} FROM cycle WHERE id = ?", (newest,)).fetchone()
    assert row[NAMES.index("ended")] is None and row[NAMES.index("error")] is None
    assert run_cli("history", "--home", str(home)).exit_code == 0


def test_failed_and_slowest_cycles_are_found_by_an_index(tmp_path):
    home = lived_in_home(tmp_path)
    run_cli("status", "--home", str(home))
    with sqlite3.connect(home / "logs" / "agent.db") as connection:
        for question, index in (
            ("SELECT id, error FROM cycle WHERE stop_reason = 'error' ORDER BY id DESC", "cycle_stop_reason"),
            ("SELECT id, duration_s FROM cycle ORDER BY duration_s DESC LIMIT 10", "cycle_duration"),
        ):
            plan = " ".join(str(row[-1]) for row in connection.execute(f"EXPLAIN QUERY PLAN {question}"))
            assert index in plan and "TEMP B-TREE" not in plan, plan


@pytest.mark.slow  # real processes, each killed
def test_a_kill_during_the_upgrade_leaves_a_home_the_next_command_finishes(tmp_path, monkeypatch):
    """AGENT_TEST_KILL_AT=k SIGKILLs `agent status` at its k-th write step, through the commit of
    this migration: after each kill the database is at the previous release's migration or at this
    one, never between, and the next command finishes with every column filled."""
    steps, k = [], 0
    while not steps or not steps[-1].startswith("agent.db: migrations to"):
        k += 1
        assert k < 20, f"no kill after the migrations' commit (saw: {steps})"
        home = previous_release_home(tmp_path / f"kill-{k}", monkeypatch)
        killed = run_agent_process("status", "--home", str(home), env={"AGENT_TEST_KILL_AT": str(k)})
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        steps.append(re.search(r"AGENT_TEST_KILL_AT: killed at (.*)", killed.stderr).group(1))
        assert version(home) in (THIS, len(migrations.MIGRATIONS)), steps[-1]
        after = run_agent_process("history", "--home", str(home), "--stop-reason", "error")
        assert after.returncode == 0, (steps[-1], after.stderr)
        assert version(home) == len(migrations.MIGRATIONS)
        assert [columns["stop_reason"] for columns, _ in columns_and_records(home)][2] == "error"
    assert "agent.db: before commit" in steps
