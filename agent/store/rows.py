"""How each kind of record becomes a row of logs/agent.db: the statements its tables (migrations.py)
take, for the cycles' own writes and for the upgrade from an older release's files alike. Pure
functions of an open database: the connection is opened elsewhere (db.py)."""

from __future__ import annotations

import datetime as _dt
import json
from typing import Any, Iterable

from agent.common.plain import plain
from agent.state import parse_time
from agent.store.connection import Database
from agent.store.home import Home

RECORD_FORMAT = 1  # the shape of a cycle's record (agent/after/report.py)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def record_day(record: dict) -> str:
    """'YYYY-MM-DD', the UTC day a record started on; '' when its `started` is not a time stamp."""
    when = parse_time(record.get("started"))
    return "" if when is None else when.astimezone(_dt.timezone.utc).strftime("%Y-%m-%d")


def _columns(record: dict) -> tuple:
    """(format, record, day, model, tokens, prompt and completion tokens, cost) of a record's row."""
    usage = record.get("usage") if isinstance(record.get("usage"), dict) else None
    cost = record.get("cost")
    return (
        RECORD_FORMAT,
        json.dumps(record, ensure_ascii=False),
        record_day(record),
        record.get("model") if isinstance(record.get("model"), str) else "",
        _count(usage.get("total_tokens")) if usage else 0,
        _count(usage.get("prompt_tokens")) if usage else 0,
        _count(usage.get("completion_tokens")) if usage else 0,
        float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None,
    )


def loaded(text: object) -> dict | None:
    """A record as stored (a JSON object); None for a row a hand edit left unreadable: skipped."""
    try:
        found = json.loads(text)
    except (TypeError, ValueError, RecursionError):
        return None
    return found if isinstance(found, dict) else None


def file_sizes(home: Home, cycle_id: str) -> tuple[int, int, int, int, int]:
    """(any file on disk, snapshot files, their bytes, log files, their bytes) of a cycle now."""
    paths = (home.snapshot(cycle_id, "before"), home.snapshot(cycle_id, "after"), home.cycle_log(cycle_id))
    found = [p.stat().st_size if p.is_file() else None for p in paths]
    snapshots, log = [s for s in found[:2] if s is not None], found[2]
    return (int(bool(snapshots) or log is not None), len(snapshots), sum(snapshots), int(log is not None), log or 0)


def count_files(db: Database, home: Home, cycle_id: str) -> None:
    """Count a cycle's files on disk in its row (made if missing), without its record (inside `db.write()`)."""
    db.execute(
        """INSERT INTO cycle (id, files, snapshot_files, snapshot_bytes, log_files, log_bytes) VALUES (?, ?, ?, ?, ?, ?)
        ON CONFLICT (id) DO UPDATE SET files = excluded.files, snapshot_files = excluded.snapshot_files,
        snapshot_bytes = excluded.snapshot_bytes, log_files = excluded.log_files, log_bytes = excluded.log_bytes""",
        (cycle_id, *file_sizes(home, cycle_id)),
    )


def insert_record(db: Database, record: dict, files: tuple[int, int, int, int, int] = (0, 0, 0, 0, 0)) -> None:
    """The record as its cycle's row (a repeated id keeps the latest record); inside `db.write()`."""
    db.execute(
        """INSERT INTO cycle (id, format, record, day, model, tokens, prompt_tokens, completion_tokens, cost,
        files, snapshot_files, snapshot_bytes, log_files, log_bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (id) DO UPDATE SET format = excluded.format, record = excluded.record, day = excluded.day,
        model = excluded.model, tokens = excluded.tokens, prompt_tokens = excluded.prompt_tokens,
        completion_tokens = excluded.completion_tokens, cost = excluded.cost, files = excluded.files,
        snapshot_files = excluded.snapshot_files, snapshot_bytes = excluded.snapshot_bytes,
        log_files = excluded.log_files, log_bytes = excluded.log_bytes""",
        (record["cycle_id"], *_columns(record), *files),
    )


def entry_text(record: dict) -> str:
    """The searchable text of one archive record: a note line, a completed task and its summary, or
    what left a memory section (`known known-3: text`, and what replaced it)."""
    value = record.get("value")
    if isinstance(record.get("section"), str):
        text = value.get("text") if isinstance(value, dict) else value
        replaced = f" (replaced by {record['replaced_by']})" if isinstance(record.get("replaced_by"), str) else ""
        return f"{record['section']} {record.get('id') or 'text'}: {'' if text is None else plain(text)}{replaced}"
    if isinstance(value, dict):
        task, summary = value.get("task"), value.get("summary")
        rest = [f"{k}: {plain(v)}" for k, v in value.items() if k not in ("task", "summary")]
        return " — ".join(plain(part) for part in (task, summary, *rest) if part not in (None, ""))
    return "" if value is None else plain(value)


def section_columns(record: dict) -> tuple[str | None, str | None, str | None]:
    """(section, entry id, replaced_by) of an archive record of what left a memory section; Nones
    for any other record (the `archive` table's columns of those names, migration m003)."""
    if not isinstance(record.get("section"), str):
        return None, None, None
    return tuple(
        record.get(key) if isinstance(record.get(key), str) else None for key in ("section", "id", "replaced_by")
    )


def add_archive(db: Database, items: Iterable[dict]) -> None:
    """Archive records ({cycle_id, archived_at, kind, reason, value}; what left a memory section
    also section, id, replaced_by) and their recall rows."""
    with db.write():
        for record in items:
            if not isinstance(record.get("kind"), str):
                continue
            seq = db.execute(
                "INSERT INTO archive (format, cycle_id, kind, record, section, entry_id, replaced_by) "
                "VALUES (1, ?, ?, ?, ?, ?, ?)",
                (
                    str(record.get("cycle_id", "?")),
                    record["kind"],
                    json.dumps(record, ensure_ascii=False),
                    *section_columns(record),
                ),
            ).lastrowid
            text = entry_text(record)
            if text.strip():
                db.execute("INSERT INTO recall (rowid, text) VALUES (?, ?)", (seq, text))
