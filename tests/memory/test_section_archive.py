"""What left a memory section, found again: `recall` and `agent show --all` find archived entries by
section and id, with what replaced them; a record a cycle that did not save left (its entry still in
active.yaml) is shown by neither, and an entry archived twice is shown once."""

from __future__ import annotations

import json
import sqlite3

from agent.config import Settings
from agent.secrets import Secrets
from agent.store.archive import Left, append_archive, archive, highest_ids, raise_ids, search
from agent.store.home import Home
from agent.tools.recall import recall
from tests.cli.helpers import done, run_cycle
from tests.helpers import read_active, run_cli, stored_bytes, write_script
from tests.memory.homes import entry, known, update, with_sections
from tests.tools.helpers import ctx_for

TASK = {"current_task": "learn", "pending_actions": []}
CONFIG = {
    "now": {"kind": "text", "limit": 100},
    "known": {"kind": "list", "limit": 12, "entry_chars": 80},
}
FACTS = ["The NAS is at 10.0.0.5", "Backups run at 02:00", "Backups take an hour", "The printer is on floor 2"]


def consolidated_home(home):
    """A home whose known-2 and known-3 were merged into known-5 and known-4 archived, through a real
    consolidation, after a cycle that replaced the text of `now`."""
    state = {**TASK, "known": known(*FACTS), "section_ids": {"known": 4}, "now": "draft"}
    with_sections(home, state, sections=CONFIG, consolidate_max_loss=0.5)
    assert run_cycle(home, [update(now="Checking backups"), done("ok")]).exit_code == 0
    reply = {
        "tool": "consolidate",
        "args": {
            "sections": {
                "known": [
                    {"id": "known-1"},
                    {"text": "Backups run at 02:00 for an hour", "cites": ["known-2", "known-3"]},
                ]
            },
            "archive": ["known-4"],
        },
    }
    script = write_script(home.parent, [reply], name="consolidate.yaml")
    result = run_cli("consolidate", "--home", str(home), "--model", f"scripted:{script}")
    assert result.exit_code == 0, result.output
    return home


def unsaved(home, *ids: str) -> None:
    """Archive records of entries active.yaml still holds, as a cycle killed between the archive and
    active.yaml leaves them."""
    held = {e["id"]: e for e in read_active(home)["known"]}
    Home.at(home).ensure_dirs()
    archive(
        Home.at(home), [Left.from_section("known", held[i], "remove") for i in ids], "20991231_000000_01", Secrets()
    )


def test_recall_finds_an_archived_entry_by_its_id_first_and_says_what_replaced_it(home):
    consolidated_home(home)
    answer = recall(ctx_for(home), "known-3", 3).splitlines()
    assert answer[1].endswith("section entry: known known-3: Backups take an hour (replaced by known-5)")
    assert "known known-4: The printer is on floor 2" in recall(ctx_for(home), "printer floor", 3)
    assert "now text: draft" in recall(ctx_for(home), "draft", 3)


def test_recall_skips_what_a_cycle_that_did_not_save_left(home):
    consolidated_home(home)
    unsaved(home, "known-1")
    assert "known-1" not in recall(ctx_for(home), "known-1 NAS 10.0.0.5", 10)
    assert "known-1" not in recall(ctx_for(home), "NAS", 10)


def test_show_all_lists_what_left_each_section_with_its_successor(home):
    consolidated_home(home)
    unsaved(home, "known-1")  # still in active.yaml: not shown
    lines = run_cli("show", "--all", "--home", str(home)).stdout.splitlines()
    start = lines.index("archived from memory sections (4):")
    shown = lines[start + 1 : start + 7]
    assert shown[0] == "  now:" and shown[1].startswith("    (text) [replace, cycle ") and shown[1].endswith("] draft")
    assert shown[2] == "  known:"
    assert shown[3].startswith("    known-2 [consolidate, cycle ") and shown[3].endswith(
        "] Backups run at 02:00 -> known-5"
    )
    assert shown[4].endswith("] Backups take an hour -> known-5") and shown[5].endswith("] The printer is on floor 2")
    data = json.loads(run_cli("show", "--all", "--json", "--home", str(home)).stdout)
    assert [(r["section"], r.get("id"), r.get("replaced_by")) for r in data["archived_from_sections"]] == [
        ("now", None, None),
        ("known", "known-2", "known-5"),
        ("known", "known-3", "known-5"),
        ("known", "known-4", None),
    ]


def test_an_entry_archived_again_after_a_cycle_that_did_not_save_is_shown_once(home):
    with_sections(home, {**TASK, "known": known(*FACTS), "section_ids": {"known": 4}}, sections=CONFIG)
    unsaved(home, "known-2")  # a killed cycle's record: active.yaml still holds known-2
    assert run_cycle(home, [update(known="REMOVE: known-2"), done("ok")]).exit_code == 0  # now it really left
    data = json.loads(run_cli("show", "--all", "--json", "--home", str(home)).stdout)
    (record,) = data["archived_from_sections"]
    assert record["id"] == "known-2" and record["cycle_id"] != "20991231_000000_01"  # the saving cycle's record
    assert recall(ctx_for(home), "known-2", 10).count("known-2:") == 1


def test_a_home_without_sections_shows_what_it_always_showed(home):
    with_sections(home, {**TASK, "notes": "x"}, sections={})
    assert run_cycle(home, [done("ok")]).exit_code == 0
    data = json.loads(run_cli("show", "--all", "--json", "--home", str(home)).stdout)
    assert "archived_from_sections" not in data
    assert "memory sections" not in run_cli("show", "--all", "--home", str(home)).stdout


def test_an_entry_id_in_a_query_is_a_phrase_of_its_two_words():
    from agent.store.archive import fts_query

    assert fts_query("where is known-12?") == '"known 12" OR "where" OR "is" OR "known" OR "12"'
    assert fts_query('known-1" OR x') == '"known 1" OR "known" OR "1" OR "or" OR "x"'  # never syntax


def test_an_entry_with_a_secret_is_archived_redacted(home, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-0123456789abcdef0123")
    with_sections(home, {**TASK, "known": [entry("known-1", "key sk-live-0123456789abcdef0123")]}, sections=CONFIG)
    secrets = Secrets.from_settings(Settings())
    Home.at(home).ensure_dirs()
    archive(Home.at(home), [Left.from_section("known", read_active(home)["known"][0], "remove")], "x", secrets)
    assert b"0123456789abcdef" not in stored_bytes(home)


def test_the_ids_mark_is_raised_by_the_database_and_ignores_what_the_runtime_never_issued(home):
    """The `section_id` table rises with every archive row (a successor in replaced_by too), in the
    row's transaction; an id of another form (a hand-written one) neither counts nor breaks it."""
    with_sections(home, TASK, sections=CONFIG)
    where = Home.at(home)
    rows = [
        {"kind": "section_entry", "section": "known", "id": "known-7", "replaced_by": "known-12", "value": {}},
        {"kind": "section_entry", "section": "known", "id": "known-3", "value": {}},
        {"kind": "section_entry", "section": "known", "id": "known-" + "9" * 40, "value": {}},
        {"kind": "section_entry", "section": "known", "id": "known-²", "value": {}},
        {"kind": "section_entry", "section": "odd", "id": "-5", "value": {}},
        {"kind": "section_text", "section": "now", "value": "old text"},
        {"kind": "dropped_edit", "id": "known-99", "value": {}},  # not what left a section: no id of one
    ]
    append_archive(where, rows)
    assert highest_ids(where) == {"known": 12}
    raise_ids(where, {"known": 4, "unknown": 2})  # `restore` and `reset`: never lowered
    assert highest_ids(where) == {"known": 12, "unknown": 2}


def test_a_database_from_before_the_sections_migration_gets_their_columns_and_mark(home):
    """A database at the migrations before m003 whose archive already holds section records (moved
    in from files): m003 reads their section and ids into columns and the mark, and recall finds them."""
    from agent.store.db import Database, close_all, records
    from agent.store.migrations import MIGRATIONS

    where = Home.at(home)
    where.ensure_dirs()
    earlier = MIGRATIONS[: [step.__name__ for step in MIGRATIONS].index("m003_memory_sections")]
    connection = sqlite3.connect(where.database, isolation_level=None)
    db = Database(connection, where.database, "test")
    with db.write():
        for step in earlier:
            step(db)
        db.execute(f"PRAGMA user_version = {len(earlier)}")
        record = {
            "kind": "section_entry",
            "cycle_id": "c1",
            "section": "known",
            "id": "known-9",
            "value": {"text": "x"},
        }
        db.execute(
            "INSERT INTO archive (format, cycle_id, kind, record) VALUES (1, 'c1', 'section_entry', ?)",
            (json.dumps(record),),
        )
        db.execute("INSERT INTO recall (rowid, text) VALUES (last_insert_rowid(), 'known known-9: x')")
    connection.close()
    close_all()
    assert records(where).one("PRAGMA user_version")[0] == len(MIGRATIONS)
    assert highest_ids(where) == {"known": 9}
    assert records(where).rows("SELECT section, entry_id, replaced_by FROM archive") == [("known", "known-9", None)]
    assert [(m.section, m.entry_id) for m in search(where, "known-9", 3)] == [("known", "known-9")]
