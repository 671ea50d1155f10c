"""Durable files: atomic replacement, JSON-lines appends and reads."""

from __future__ import annotations

import json

import pytest

from agent.outcomes import DiskError
from agent.store.files import append_jsonl, atomic_write, read_jsonl


def records(*numbers: int) -> list[dict]:
    return [{"n": n, "text": f"record {n}"} for n in numbers]


def line(record: dict) -> bytes:
    return (json.dumps(record) + "\n").encode()


# ------------------------------------------------------------------------------ atomic writes


def test_atomic_write_replaces_the_file_whole_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "active.yaml"
    target.write_text("old\n")
    atomic_write(target, b"new\n")
    assert target.read_bytes() == b"new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["active.yaml"]
    assert target.stat().st_mode & 0o777 == 0o600


def test_atomic_write_into_a_missing_folder_is_a_disk_error_naming_the_file(tmp_path):
    with pytest.raises(DiskError, match="could not write .*gone/active.yaml"):
        atomic_write(tmp_path / "gone" / "active.yaml", b"x")


# ----------------------------------------------------------------------------- JSON-line appends


def test_appended_records_read_back_in_order(tmp_path):
    path = tmp_path / "archive.jsonl"
    append_jsonl(path, records(1, 2))
    append_jsonl(path, records(3))
    assert read_jsonl(path, "n") == records(1, 2, 3)


def test_a_foreign_line_is_skipped(tmp_path):
    path = tmp_path / "index.jsonl"
    path.write_bytes(line(records(1)[0]) + b"not json\n" + line({"other": 1}) + b"[1, 2]\n" + line(records(2)[0]))
    assert read_jsonl(path, "n") == records(1, 2)

