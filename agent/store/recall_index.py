"""The recall index: full-text search over what bounded memory archived to logs/archive.jsonl.

SQLite FTS5 (the standard library's sqlite3) in logs/recall.sqlite3. The index remembers how
many bytes of the archive it holds and a fingerprint of their start, so each search first
indexes only the lines appended since (the archive is append-only), and rebuilds the whole
index when it is missing, corrupt, from another version, or no longer matches the archive (the
archive was replaced or cut). Lines are read one at a time and indexed a few MiB per transaction,
so even a first build over years of archive runs in bounded memory. A rebuild is written to a
temporary file and renamed into place, so a crash never leaves a half-built index. The index is
derived data: deleting it loses nothing.

The query comes from the model, so it is never FTS5 syntax: its words are each quoted as a
string and OR-ed, so operators (AND, NOT, NEAR), column filters, `*` and quotes are just text.
Used only under the home's lock (by the recall tool, during a cycle).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from agent.common.plain import plain
from agent.store.files import SECRET_FILE_MODE, _temporary_path
from agent.store.home import Home
from agent.store.tail import lines_forwards

INDEX_VERSION = 2  # PRAGMA user_version: an index written by another version is rebuilt (2: sections)
FINGERPRINT_BYTES = 4096
BATCH_BYTES = 4 * 1024 * 1024  # archive bytes indexed per transaction
MAX_QUERY_CHARS = 2000
MAX_QUERY_WORDS = 16
MAX_WORD_CHARS = 64

_WORD = re.compile(r"[^\W_]+")  # letters and digits: what the unicode61 tokenizer keeps

_SCHEMA = """
CREATE TABLE progress (archive_bytes INTEGER NOT NULL, fingerprint TEXT NOT NULL);
INSERT INTO progress VALUES (0, '');
CREATE VIRTUAL TABLE entries USING fts5(
    text, kind UNINDEXED, cycle_id UNINDEXED, section UNINDEXED, entry_id UNINDEXED,
    tokenize = 'porter unicode61 remove_diacritics 2'
);
"""


@dataclass(frozen=True)
class Match:
    """One archived item that matched: a note line or a completed task."""

    cycle_id: str
    kind: str  # "note" | "completed_task" | "section_entry" | "section_text" ..., as in the archive
    text: str
    section: str | None = None  # what left a memory section: which one
    entry_id: str | None = None  # and, for a list's entry, its id


def index_path(home: Home) -> Path:
    return home.recall_index


_ENTRY_ID = re.compile(r"\b[a-z][a-z0-9_]{0,31}-[0-9]{1,18}\b")  # a section entry's id: known-12


def fts_query(text: str) -> str | None:
    """An FTS5 MATCH expression for untrusted text: an entry id it names as a phrase (`known-12`:
    "known 12", the two words side by side, so the entry ranks first), then its first words, each
    quoted, OR-ed; None if none."""
    text = text[:MAX_QUERY_CHARS]
    phrases = [" ".join(_WORD.findall(found)) for found in _ENTRY_ID.findall(text.lower())][:MAX_QUERY_WORDS]
    words: list[str] = []
    for word in _WORD.findall(text):
        word = word[:MAX_WORD_CHARS].lower()
        if word not in words:
            words.append(word)
        if len(words) == MAX_QUERY_WORDS:
            break
    # No word holds a double quote, so each "word" is a plain string to FTS5, never syntax.
    return " OR ".join([*(f'"{phrase}"' for phrase in dict.fromkeys(phrases)), *(f'"{w}"' for w in words)]) or None


def entry_text(record: dict) -> str:
    """The searchable text of one archive record: a note line, a completed task and its summary, or
    what left a memory section (`known known-3: text`, and what replaced it)."""
    value = record.get("value")
    if isinstance(record.get("section"), str):
        text = value.get("text") if isinstance(value, dict) else value
        replaced = f" (replaced by {record['replaced_by']})" if isinstance(record.get("replaced_by"), str) else ""
        return f"{record['section']} {record.get('id') or 'text'}: {'' if text is None else text}{replaced}"
    if isinstance(value, dict):
        task, summary = value.get("task"), value.get("summary")
        rest = [f"{k}: {plain(v)}" for k, v in value.items() if k not in ("task", "summary")]
        return " — ".join(plain(part) for part in (task, summary, *rest) if part not in (None, ""))
    return "" if value is None else plain(value)


def _fingerprint(archive: Path, size: int) -> str:
    with open(archive, "rb") as handle:
        return hashlib.sha256(handle.read(min(size, FINGERPRINT_BYTES))).hexdigest()


def _catch_up(db: sqlite3.Connection, archive: Path) -> bool:
    """Index the archive's lines appended since last time; False when the index is not this archive's."""
    indexed, fingerprint = db.execute("SELECT archive_bytes, fingerprint FROM progress").fetchone()
    try:
        size = archive.stat().st_size
    except FileNotFoundError:
        size = 0
    if size < indexed or (indexed and _fingerprint(archive, indexed) != fingerprint):
        return False
    if size == indexed:
        return True
    rows: list[tuple] = []
    batch_start = indexed
    # streamed, a batch per transaction: memory stays bounded however large the archive (a first
    # build reads years of it); a torn last line (a crash mid-append) waits for the next time
    for line, end in lines_forwards(archive, indexed):
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if isinstance(record, dict) and isinstance(record.get("kind"), str):
                text = entry_text(record)
                if text.strip():
                    section, entry_id = (record.get(key) for key in ("section", "id"))
                    rows.append(
                        (
                            text,
                            record["kind"],
                            str(record.get("cycle_id", "?")),
                            section if isinstance(section, str) else None,
                            entry_id if isinstance(entry_id, str) else None,
                        )
                    )
        indexed = end
        if indexed - batch_start >= BATCH_BYTES:
            _commit(db, archive, rows, indexed)
            rows, batch_start = [], indexed
    if indexed != batch_start:
        _commit(db, archive, rows, indexed)
    return True


def _commit(db: sqlite3.Connection, archive: Path, rows: list[tuple], indexed: int) -> None:
    with db:  # one transaction: the rows and the new offset together, or neither
        db.executemany("INSERT INTO entries (text, kind, cycle_id, section, entry_id) VALUES (?, ?, ?, ?, ?)", rows)
        db.execute(
            "UPDATE progress SET archive_bytes = ?, fingerprint = ?",
            (indexed, _fingerprint(archive, indexed) if indexed else ""),
        )


def _rebuild(path: Path, archive: Path) -> None:
    """A new index of the whole archive, written beside `path` and renamed over it."""
    tmp = _temporary_path(path)  # named like atomic_write's, so a crash's leftover is cleaned the same way
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, SECRET_FILE_MODE))
    try:
        db = sqlite3.connect(tmp)
        try:
            db.execute("PRAGMA journal_mode = OFF")  # a fresh file: nothing to roll back to
            db.executescript(_SCHEMA)
            db.execute(f"PRAGMA user_version = {INDEX_VERSION}")
            _catch_up(db, archive)
        finally:
            db.close()
        with contextlib.suppress(FileNotFoundError):  # a stale journal would "roll back" the new file
            os.unlink(f"{path}-journal")
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def open_index(home: Home) -> sqlite3.Connection:
    """The recall index, caught up with the archive: incrementally, or rebuilt when it must be."""
    path = index_path(home)
    if path.exists():
        db = None
        try:
            db = sqlite3.connect(path)
            if db.execute("PRAGMA user_version").fetchone()[0] == INDEX_VERSION and _catch_up(db, home.archive):
                return db
        except sqlite3.DatabaseError:  # not a database, malformed, or missing its tables: rebuilt below
            pass
        if db is not None:
            db.close()
    _rebuild(path, home.archive)
    return sqlite3.connect(path)


def search(home: Home, query: str, limit: int) -> list[Match]:
    """The best `limit` archived items for the words of `query`, best first (newest first on a tie)."""
    expression = fts_query(query)
    if expression is None:
        return []
    db = open_index(home)
    try:
        rows = db.execute(
            "SELECT cycle_id, kind, text, section, entry_id FROM entries WHERE entries MATCH ? "
            "ORDER BY rank, rowid DESC LIMIT ?",
            (expression, limit),
        ).fetchall()
    finally:
        db.close()
    return [Match(*row) for row in rows]
