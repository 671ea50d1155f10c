"""The archive: what bounded memory moved out of the scratchpad, and its full-text recall index.

Each archived item (a note line, a completed task, a replaced state...) is a row of logs/agent.db's
`archive` table, and its searchable text a row of `recall` (SQLite FTS5, contentless: the index
only, keyed by the archive row), written in the same transaction: the index never lags the
archive and needs no catch-up. Rows are never deleted.

The query comes from the model, so it is never FTS5 syntax: its words are each quoted as a string
and OR-ed, so operators (AND, NOT, NEAR), column filters, `*` and quotes are just text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator

from agent.store.db import records
from agent.store.home import Home
from agent.store.rows import add_archive, entry_text, loaded

MAX_QUERY_CHARS = 2000
MAX_QUERY_WORDS = 16
MAX_WORD_CHARS = 64
_WORD = re.compile(r"[^\W_]+")  # letters and digits: what the unicode61 tokenizer keeps


@dataclass(frozen=True)
class Match:
    """One archived item that matched: a note line or a completed task."""

    cycle_id: str
    kind: str  # "note" | "completed_task", as in the archive
    text: str


def append_archive(home: Home, items: list[dict]) -> None:
    """Archive `items` (written and synced before the state that lost them is saved)."""
    if items:
        add_archive(records(home), items)


def archived(home: Home, kind: str | None = None) -> Iterator[dict]:
    """The archive's records (of one kind), oldest first, streamed."""
    sql = "SELECT record FROM archive" + (" WHERE kind = ?" if kind else "") + " ORDER BY seq"
    rows = records(home, create=False).stream(sql, (kind,) if kind else ())
    yield from (record for (text,) in rows if (record := loaded(text)) is not None)


def counts_by_kind(home: Home) -> dict[str, int]:
    return dict(records(home, create=False).rows("SELECT kind, count(*) FROM archive GROUP BY kind"))


def fts_query(text: str) -> str | None:
    """An FTS5 MATCH expression for untrusted text: its first words, each quoted, OR-ed; None if none."""
    words: list[str] = []
    for word in _WORD.findall(text[:MAX_QUERY_CHARS]):
        word = word[:MAX_WORD_CHARS].lower()
        if word not in words:
            words.append(word)
        if len(words) == MAX_QUERY_WORDS:
            break
    # No word holds a double quote, so each "word" is a plain string to FTS5, never syntax.
    return " OR ".join(f'"{word}"' for word in words) or None


def search(home: Home, query: str, limit: int) -> list[Match]:
    """The best `limit` archived items for the words of `query`, best first (newest first on a tie)."""
    expression = fts_query(query)
    if expression is None:
        return []
    rows = records(home, create=False).rows(
        "SELECT archive.cycle_id, archive.kind, archive.record FROM (SELECT rowid, rank FROM recall "
        "WHERE recall MATCH ? ORDER BY rank, rowid DESC LIMIT ?) AS found JOIN archive ON archive.seq = found.rowid "
        "ORDER BY found.rank, found.rowid DESC",
        (expression, limit),
    )
    return [Match(cycle_id, kind, entry_text(loaded(text) or {})) for cycle_id, kind, text in rows]
