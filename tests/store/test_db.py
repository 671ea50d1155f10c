"""logs/agent.db (agent/store/db.py): the journal chosen for the file system, errors as one line of
their kind, writers queueing on SQLite's lock, a reader that never makes a database, and the kinds
of file a home holds."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from agent.common import file_systems
from agent.common.file_systems import file_system
from agent.common.outcomes import Busy, DiskError
from agent.store import connection
from agent.store import db as database
from agent.store.db import any_rows, journal_mode, records
from agent.store.home import Home
from tests.helpers import REPO, make_home, run_cli, tree_digest, write_script
from tests.store.faults import full, read_only


def test_the_journal_is_wal_on_a_local_file_system_and_rollback_on_a_network_one(tmp_path, monkeypatch):
    local = file_system(tmp_path)
    assert local and journal_mode(tmp_path) == ("wal", f"WAL journal ({local})")
    monkeypatch.setattr(file_systems, "NETWORK", file_systems.NETWORK | {local})
    mode, why = journal_mode(tmp_path)
    assert mode == "delete" and f"is on {local}, a network file system, where WAL cannot work" in why


def test_a_home_on_a_network_file_system_runs_its_cycles_on_a_rollback_journal_and_doctor_says_so(
    tmp_path, monkeypatch
):
    """As a home on NFS would: the rollback journal chosen when the database is made, and kept."""
    monkeypatch.setattr(file_systems, "NETWORK", file_systems.NETWORK | {file_system(tmp_path)})
    home = make_home(tmp_path, "")
    script = write_script(tmp_path, [{"tool": "done", "args": {"summary": "ok"}}])
    for _ in range(2):
        assert run_cli("run", "--home", str(home), "--model", f"scripted:{script}", "-q").exit_code == 0
    raw = sqlite3.connect(home / "logs" / "agent.db")
    assert raw.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    raw.close()
    assert not (home / "logs" / "agent.db-wal").exists()
    doctor = json.loads(run_cli("doctor", "--home", str(home), "--json").stdout)
    [check] = [c for c in doctor if c["check"] == "records"]
    assert check["ok"] and "rollback journal" in check["detail"] and "network file system" in check["detail"]
    assert len(json.loads(run_cli("history", "--home", str(home), "--json").stdout)) == 2


def test_the_database_is_made_owner_only_in_wal_mode_with_synchronous_writes(home):
    h = Home.at(home)
    db = records(h)
    assert h.database.stat().st_mode & 0o777 == 0o600
    assert db.one("PRAGMA journal_mode") == ("wal",) and db.one("PRAGMA synchronous") == (2,)  # FULL
    assert db.one("PRAGMA auto_vacuum") == (2,)  # incremental: pruning gives space back


MAKE = """
import sys
from agent.store.db import records
from agent.store.home import Home
sys.stdin.read()  # every process waits here, so they all find no database and make it together
records(Home.at(sys.argv[1])).execute("INSERT INTO inbox (format, record) VALUES (1, ?)", (sys.argv[2],))
"""


def test_processes_making_the_database_at_once_all_use_one_and_leave_nothing_else(home):
    """Each builds its own under a private name and links it into place: one wins, the rest open
    the winner's, every row lands in it and no private copy is left behind."""
    makers = [
        subprocess.Popen([sys.executable, "-c", MAKE, str(home), f"r{i}"], stdin=subprocess.PIPE, cwd=REPO, text=True)
        for i in range(8)
    ]
    for maker in makers:
        maker.stdin.close()  # released together
    assert [maker.wait(timeout=120) for maker in makers] == [0] * 8
    h = Home.at(home)
    assert sorted(text for (text,) in records(h).rows("SELECT record FROM inbox")) == [f"r{i}" for i in range(8)]
    assert sorted(p.name for p in h.database.parent.iterdir() if "agent.db" in p.name) == [
        "agent.db",
        "agent.db-shm",
        "agent.db-wal",
    ]


def test_reading_a_home_without_a_database_makes_none(home):
    h = Home.at(home)
    frozen = tree_digest(home)
    assert not any_rows(h, "cycle") and run_cli("history", "--home", str(home), "--json").stdout == "[]\n"
    assert tree_digest(home) == frozen and not h.database.exists()


def test_a_read_only_database_is_a_disk_error_naming_it_and_nothing_is_half_written(home):
    h = Home.at(home)
    db = records(h)
    read_only(h)
    with pytest.raises(DiskError, match=re.escape(f"could not write {h.database}: Read-only file system")):
        with db.write():
            db.execute("INSERT INTO inbox (format, record) VALUES (1, '{}')")
    assert not any_rows(h, "inbox")


def test_a_full_database_is_a_disk_error_and_the_transaction_leaves_nothing(home):
    h = Home.at(home)
    db = records(h)
    full(h)
    with pytest.raises(DiskError, match="No space left on device \\(the disk is full\\)"):
        with db.write():
            db.execute("INSERT INTO inbox (format, record) VALUES (1, '{}')")  # fits in a page: kept back...
            db.execute("INSERT INTO transcript (format, cycle_id, record) VALUES (1, 'x', ?)", ("x" * 100_000,))
    assert not any_rows(h, "inbox") and not any_rows(h, "transcript")


HOLD = """
import sqlite3, sys
connection = sqlite3.connect(sys.argv[1], isolation_level=None)
connection.execute("BEGIN IMMEDIATE")
print("holding", flush=True)
sys.stdin.read()
"""


def test_a_writer_that_keeps_the_database_past_the_wait_is_busy_with_one_line(home, monkeypatch):
    """Writers queue on SQLite's lock; one held longer than the wait is exit 5 naming the database."""
    h = Home.at(home)
    records(h)
    database.close_all()
    monkeypatch.setattr(connection, "BUSY_TIMEOUT_S", 0.2)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(h.database)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline() == "holding\n"
        with pytest.raises(Busy, match=f"{h.database} is busy: another agent process kept it locked for 0.2s"):
            db = records(h)
            with db.write():
                pass
        (home / "scratchpad" / "active.yaml").write_text("current_task: say hi\n")
        before = (home / "scratchpad" / "active.yaml").read_bytes()
        script = write_script(home.parent, [{"tool": "done", "args": {"summary": "ok"}}])
        result = run_cli("run", "--home", str(home), "--model", f"scripted:{script}")
        assert result.exit_code == 5 and result.stderr.splitlines() == [
            f"agent: error: {h.database} is busy: another agent process kept it locked for 0.2s; try again later"
        ]
        assert (home / "scratchpad" / "active.yaml").read_bytes() == before and not list(h.scratchpad.glob("2*"))
    finally:
        holder.communicate("", timeout=60)


def test_a_writer_waits_for_another_transaction_and_then_goes_on(home):
    """The wait is SQLite's: a writer blocked by a short transaction of another process proceeds."""
    h = Home.at(home)
    records(h)
    database.close_all()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(h.database)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout.readline() == "holding\n"
    code = (
        "import sys; from agent.store.home import Home; from agent.memory.inbox import queue_edit; "
        "queue_edit(Home.at(sys.argv[1]), {'op': 'goal_add', 'text': 'g'}); print('queued')"
    )
    writer = subprocess.Popen([sys.executable, "-c", code, str(home)], stdout=subprocess.PIPE, text=True, cwd=REPO)
    holder.communicate("", timeout=60)  # the holder lets go (it may have been waited for, or not yet)
    assert writer.communicate(timeout=60)[0] == "queued\n" and any_rows(h, "inbox")


def test_a_home_made_by_init_and_one_cycle_holds_at_most_ten_kinds_of_file_each_in_the_reference(tmp_path):
    home = make_home(tmp_path, "workspace: workspace\n")
    (home / "examples.yaml").write_text((REPO / "agent" / "templates" / "examples.yaml").read_text())
    (home / "scratchpad" / "active.yaml").write_text("current_task: say hi\n")
    script = write_script(
        tmp_path,
        [
            {"tool": "write_file", "args": {"path": "a.txt", "content": "a"}},
            {"tool": "done", "args": {"summary": "ok"}},
        ],
    )
    assert run_cli("run", "--home", str(home), "--model", f"scripted:{script}", "-q").exit_code == 0
    database.close_all()
    kinds = {
        re.sub(r"\d{8}_\d{6}_\d{2}", "<id>", p.relative_to(home).as_posix())
        for p in home.rglob("*")
        if p.is_file() and not p.relative_to(home).as_posix().startswith("workspace/")
    } | {"workspace/"}
    assert kinds == {
        ".agent.lock",
        "config.yaml",
        "rules.md",
        "examples.yaml",
        "scratchpad/active.yaml",
        "scratchpad/<id>_before.yaml",
        "scratchpad/<id>_after.yaml",
        "logs/cycle_<id>.log",
        "logs/agent.db",
        "workspace/",
    }
    reference = (REPO / "docs" / "reference.md").read_text()
    section = reference[reference.index("## A home's files") : reference.index("## Commands")]
    for kind in kinds:
        assert kind.rstrip("/").rsplit("/", 1)[-1] in section, kind


def test_zeros_where_the_database_should_be_are_not_a_usable_database(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "agent.db").write_bytes(b"\0" * 8192)  # zeros: an unusable header
    with pytest.raises(DiskError, match="is not a usable database"):
        records(Home.at(tmp_path))


def test_the_reference_lists_the_same_tables_the_migrations_make():
    made = sqlite3.connect(":memory:")
    db = database.Database(made, Path(":memory:"), "")
    from agent.store.migrations import migrate

    migrate(db)
    tables = {
        name
        for (name,) in made.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL TABLE%'"
        )
        if not name.startswith(("recall_", "sqlite_"))
    } | {"recall"}
    assert tables == {
        "cycle",
        "spend",
        "disk",
        "transcript",
        "call",
        "archive",
        "recall",
        "approval",
        "inbox",
        "probe",
        "section_id",
    } | {"upgrade"} | {"outcome", "outlet"} | {"provenance", "workspace_write"}
    reference = (REPO / "docs" / "reference.md").read_text()
    section = reference[reference.index("## A home's files") : reference.index("## Commands")]
    for table in tables:
        assert f"`{table}`" in section, table


def test_rows_a_hand_edit_broke_are_skipped_by_every_reader_never_a_traceback(home, tmp_path):
    """`sqlite3 logs/agent.db` lets an operator write anything: what is not a record is skipped."""
    script = write_script(tmp_path, [{"tool": "done", "args": {"summary": "ok"}}])
    (home / "scratchpad" / "active.yaml").write_text("current_task: say hi\n")
    assert run_cli("run", "--home", str(home), "--model", f"scripted:{script}", "-q").exit_code == 0
    db = records(Home.at(home))
    with db.write():
        db.execute("INSERT INTO cycle (id, format, record, files) VALUES ('20990101_000000_01', 1, '{torn', 0)")
        db.execute("INSERT INTO archive (format, cycle_id, kind, record) VALUES (1, 'x', 'note', '[1, 2')")
        db.execute("INSERT INTO transcript (format, cycle_id, record) SELECT 1, id, 'not json' FROM cycle")
        db.execute("INSERT INTO inbox (format, record) VALUES (1, '\"a string\"')")
        db.execute("INSERT INTO call (format, call, event, record) VALUES (1, 'x/1', 'intent', '{')")
    database.close_all()
    for command in (["history", "--json"], ["status"], ["show", "--all"], ["logs", "--transcript"], ["task", "list"]):
        result = run_cli(*command, "--home", str(home))
        assert result.exit_code == 0 and "Traceback" not in result.output, (command, result.output)
    (home / "scratchpad" / "active.yaml").write_text("current_task: again\n")
    assert run_cli("run", "--home", str(home), "--model", f"scripted:{script}", "-q").exit_code == 0


def _database_before_the_window_index(home: Path) -> Home:
    """A database at the migrations before m005 (the window's index) holding two records."""
    from agent.store.migrations import MIGRATIONS

    where = Home.at(home)
    where.ensure_dirs()
    earlier = MIGRATIONS[: [step.__name__ for step in MIGRATIONS].index("m005_cycle_window")]
    connection = sqlite3.connect(where.database, isolation_level=None)
    db = database.Database(connection, where.database, "test")
    with db.write():
        for step in earlier:
            step(db)
        db.execute(f"PRAGMA user_version = {len(earlier)}")
        for cycle_id, reason in (("20260101_000000_01", "done"), ("20260101_001500_01", "error")):
            record = json.dumps({"cycle_id": cycle_id, "stop_reason": reason})
            db.execute("INSERT INTO cycle (id, format, record) VALUES (?, 1, ?)", (cycle_id, record))
    connection.close()
    database.close_all()
    return where


def test_the_window_index_holds_the_stop_reason_of_the_records_already_in(home):
    where = _database_before_the_window_index(home)
    found = records(where).rows("SELECT id, stop_reason FROM cycle INDEXED BY cycle_window ORDER BY id")
    assert found == [("20260101_000000_01", "done"), ("20260101_001500_01", "error")]
