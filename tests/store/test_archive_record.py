"""The archive's one record type (agent/store/archive.py `Left`, written by `archive`): whatever the
route, a record has the fields, in the order, the archive's rows always had, so rows written by an
earlier release are never rewritten and read alike."""

from __future__ import annotations

import json
from pathlib import Path

from agent.store.archive import Left, archive, archived
from agent.store.home import Home

OLDER = Path(__file__).parent / "older_home" / "logs" / "archive.jsonl"


def remade(record: dict) -> dict:
    left = Left(record["kind"], record["value"], record["reason"], record.get("section"), record.get("replaced_by"))
    return {"cycle_id": record["cycle_id"], "archived_at": record["archived_at"], **left.record()}


def whole_records(path: Path) -> list[dict]:
    found = []
    for line in path.read_text().splitlines():
        try:
            found.append(json.loads(line))
        except json.JSONDecodeError:  # the torn last line the upgrade's tests read
            continue
    return found


def test_an_earlier_releases_records_are_the_form_left_writes():
    records = whole_records(OLDER)
    assert len(records) >= 10
    for record in records:
        assert json.dumps(remade(record)) == json.dumps(record)


def test_a_section_entry_names_its_section_id_and_successor_in_that_order():
    entry = {"id": "known-3", "text": "the backup runs at 2"}
    record = Left.from_section("known", entry, "consolidate", "known-9").record()
    assert list(record) == ["kind", "section", "reason", "value", "id", "replaced_by"]
    assert record["kind"] == "section_entry" and record["id"] == "known-3"


def test_a_text_sections_old_text_has_no_id():
    assert Left.from_section("now", "old text", "replace").record() == {
        "kind": "section_text",
        "section": "now",
        "reason": "replace",
        "value": "old text",
    }


def test_every_route_is_one_call_of_the_one_writer(tmp_path):
    home = Home.at(tmp_path)
    home.ensure_dirs()
    routes = [
        Left("note", "a line", "notes_budget"),
        Left("queued_task", "rotate logs", "dropped by the model"),
        Left("replaced_state", {"notes": ""}, "agent reset"),
        Left.from_section("known", {"id": "known-1", "text": "x"}, "remove"),
    ]
    assert archive(home, routes, "20260101_000000_01") == 4
    assert [(r["kind"], r["reason"], r["cycle_id"]) for r in archived(home)] == [
        ("note", "notes_budget", "20260101_000000_01"),
        ("queued_task", "dropped by the model", "20260101_000000_01"),
        ("replaced_state", "agent reset", "20260101_000000_01"),
        ("section_entry", "remove", "20260101_000000_01"),
    ]
