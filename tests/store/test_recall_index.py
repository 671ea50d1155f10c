"""The recall index: SQLite FTS5 over logs/archive.jsonl, caught up incrementally, rebuilt when it must be."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from agent.store.home import Home
from agent.store.recall_index import MAX_QUERY_WORDS, fts_query, index_path, open_index, search
from tests.helpers import ARCHIVED_SAMPLE, archive_items


def texts(home: Path, query: str, limit: int = 10) -> list[str]:
    return [match.text for match in search(Home.at(home), query, limit)]


def indexed_rows(home: Path) -> list[tuple]:
    with sqlite3.connect(index_path(Home.at(home))) as db:
        return db.execute("SELECT text, kind, cycle_id FROM entries ORDER BY rowid").fetchall()


def test_the_index_catches_up_with_appended_lines_without_a_rebuild(home):
    archive_items(home, ARCHIVED_SAMPLE[:2])
    texts(home, "disk")
    with sqlite3.connect(index_path(Home.at(home))) as db:  # a marker row no rebuild would keep
        db.execute("INSERT INTO entries (text, kind, cycle_id) VALUES ('marker zebra', 'note', 'm')")
    archive_items(home, ARCHIVED_SAMPLE[2:], cycle_id="20260102_000000")
    assert texts(home, "nginx") == ["Rotate the nginx logs — rotated and compressed 4 files"]
    rows = indexed_rows(home)
    assert [r[0] for r in rows][:3] == [ARCHIVED_SAMPLE[0][1], ARCHIVED_SAMPLE[1][1], "marker zebra"]
    assert len(rows) == len(ARCHIVED_SAMPLE) + 1 and rows[-1][2] == "20260102_000000"
    with sqlite3.connect(index_path(Home.at(home))) as db:
        assert db.execute("SELECT archive_bytes FROM progress").fetchone()[0] == Home.at(home).archive.stat().st_size


def test_a_torn_last_line_is_indexed_once_it_is_whole(home):
    archive_items(home, ARCHIVED_SAMPLE[:1])
    path = Home.at(home).archive
    record = json.dumps({"cycle_id": "c2", "kind": "note", "value": "half written walrus"}) + "\n"
    with open(path, "a") as handle:
        handle.write(record[:20])  # a crash mid-append
    assert texts(home, "walrus") == []
    with open(path, "a") as handle:
        handle.write(record[20:])
    assert texts(home, "walrus") == ["half written walrus"]


def test_foreign_and_broken_archive_lines_are_skipped(home):
    (home / "logs").mkdir()
    Home.at(home).archive.write_text(
        'not json\n[1, 2]\n{"no": "kind"}\n' + json.dumps({"kind": "note", "value": "the one real otter"}) + "\n"
    )
    [match] = search(Home.at(home), "otter", 10)
    assert (match.cycle_id, match.kind, match.text) == ("?", "note", "the one real otter")


@pytest.mark.parametrize("damage", ["delete", "garbage", "empty", "foreign table"])
def test_a_missing_or_corrupt_index_is_rebuilt_from_the_archive(home, damage):
    archive_items(home, ARCHIVED_SAMPLE)
    texts(home, "disk")
    index = index_path(Home.at(home))
    if damage == "delete":
        index.unlink()
    elif damage == "garbage":
        index.write_bytes(b"this is not a database at all" * 100)
    elif damage == "empty":
        index.write_bytes(b"")
    else:
        index.unlink()
        with sqlite3.connect(index) as db:
            db.execute("CREATE TABLE unrelated (x)")
    assert texts(home, "backup") == ["The backup job failed on Tuesday: disk full"]
    assert len(indexed_rows(home)) == len(ARCHIVED_SAMPLE)
    assert not list((home / "logs").glob(".*.tmp"))


def test_an_archive_that_was_replaced_gets_a_fresh_index(home):
    archive_items(home, ARCHIVED_SAMPLE)
    texts(home, "disk")
    Home.at(home).archive.unlink()
    archive_items(home, [("note", "a brand new beginning")])
    assert texts(home, "backup") == []
    assert [r[0] for r in indexed_rows(home)] == ["a brand new beginning"]


def test_an_index_of_another_version_is_rebuilt(home):
    archive_items(home, ARCHIVED_SAMPLE)
    texts(home, "disk")
    with sqlite3.connect(index_path(Home.at(home))) as db:
        db.execute("DELETE FROM entries")
        db.execute("PRAGMA user_version = 999")
    assert texts(home, "backup") == ["The backup job failed on Tuesday: disk full"]


def test_the_index_file_is_private(home):
    archive_items(home, ARCHIVED_SAMPLE)
    texts(home, "disk")
    assert index_path(Home.at(home)).stat().st_mode & 0o077 == 0


def test_equal_matches_come_newest_first(home):
    archive_items(home, [("note", "heron seen")], cycle_id="20260101_000000")
    archive_items(home, [("note", "heron seen")], cycle_id="20260301_000000")
    assert [m.cycle_id for m in search(Home.at(home), "heron", 2)] == ["20260301_000000", "20260101_000000"]


def test_fts_query_quotes_each_word_and_bounds_them():
    assert fts_query('disk" OR NEAR(x* "y') == '"disk" OR "or" OR "near" OR "x" OR "y"'
    assert fts_query("*()^:-") is None
    assert fts_query("Disk disk DISK") == '"disk"'
    long = fts_query(" ".join(f"w{i}" for i in range(100)) + " " + "z" * 500)
    assert long.count('"') == 2 * MAX_QUERY_WORDS and "z" not in long


def test_open_index_returns_a_caught_up_connection(home):
    archive_items(home, ARCHIVED_SAMPLE)
    db = open_index(Home.at(home))
    try:
        assert db.execute("SELECT count(*) FROM entries").fetchone()[0] == len(ARCHIVED_SAMPLE)
    finally:
        db.close()
