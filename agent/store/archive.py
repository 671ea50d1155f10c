"""The archive: whatever left memory, by any route, and its full-text recall index.

Each archived item (a note line, a completed task, a queued task or a goal dropped, a replaced
state, what left a memory section...) is a row of logs/agent.db's `archive` table, and its searchable text a row of `recall`
(SQLite FTS5, contentless: the index only, keyed by the archive row), written in the same
transaction: the index never lags the archive and needs no catch-up. Rows are never deleted. What
left a memory section also has its section, entry id and successor in columns of its row, and the
`section_id` table keeps each section's highest id the archive received (migration m003).

The query comes from the model, so it is never FTS5 syntax: its words are each quoted as a string
and OR-ed, so operators (AND, NOT, NEAR), column filters, `*` and quotes are just text.
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from agent.store.db import records
from agent.store.home import Home
from agent.store.rows import add_archive, entry_text, loaded

if TYPE_CHECKING:
    from agent.secrets import Secrets

REPLACED_STATE = "replaced_state"  # the kind of a state `agent reset` or `agent restore` replaced
DROPPED_TASK = "dropped_task"  # the kind of a current task the operator dropped (`agent task drop 0`)
SECTION_ENTRY, SECTION_TEXT = "section_entry", "section_text"  # what left a memory section: a list's entry, a text
MAX_QUERY_CHARS = 2000
MAX_QUERY_WORDS = 16
MAX_WORD_CHARS = 64
_WORD = re.compile(r"[^\W_]+")  # letters and digits: what the unicode61 tokenizer keeps


@dataclass(frozen=True)
class Match:
    """One archived item that matched: a note line or a completed task."""

    cycle_id: str
    kind: str  # "note" | "completed_task" | "section_entry" | "section_text" ..., as in the archive
    text: str
    section: str | None = None  # what left a memory section: which one
    entry_id: str | None = None  # and, for a list's entry, its id


@dataclass(frozen=True)
class Left:
    """Something that left memory, whatever the route: the archive's one record type. `kind`: a
    `note` line, a `completed_task`, a `queued_task` or `goal` the model dropped, a
    `dropped_task` or `dropped_edit` of the operator, a `replaced_state`, a section's entry or text
    (`from_section`); `reason`: the route (`notes_budget`, `reflect`, `remove`, `evict`, `consolidate`,
    `agent restore`...). A section's item names its `section` and, for a consolidation's source, the
    successor that now stands for it (`replaced_by`)."""

    kind: str
    value: Any
    reason: str
    section: str | None = None
    replaced_by: str | None = None

    @classmethod
    def from_section(cls, section: str, value: Any, reason: str, replaced_by: str | None = None) -> "Left":
        """What left a memory section: a list's entry (the whole mapping) or a text section's old text."""
        return cls(SECTION_ENTRY if isinstance(value, dict) else SECTION_TEXT, value, reason, section, replaced_by)

    def record(self) -> dict:
        """Its archive record but the cycle and the time (`archive` adds them): the same fields, in the
        same order, as every record the archive ever held, so old rows and new read alike."""
        found: dict = {"kind": self.kind}
        if self.section is not None:
            found["section"] = self.section
        found.update(reason=self.reason, value=self.value)
        if self.section is not None and isinstance(self.value, dict) and isinstance(self.value.get("id"), str):
            found["id"] = self.value["id"]
        if self.replaced_by is not None:
            found["replaced_by"] = self.replaced_by
        return found


def archive(home: Home, items: Iterable[Left], cycle_id: str, secrets: Secrets | None = None) -> int:
    """The one writer of what leaves memory: `items` archived as left in cycle (or operator command)
    `cycle_id`, redacted with `secrets`, before the state that lost them is saved (the database raises
    each section's highest id in the same transaction); how many records."""
    stamp = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    found = [{"cycle_id": cycle_id, "archived_at": stamp, **item.record()} for item in items]
    append_archive(home, secrets.redact(found) if secrets is not None else found)
    return len(found)


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


def section_records(home: Home, section: str | None = None) -> Iterator[tuple[int, dict]]:
    """(row, record) of what left the memory sections (or one of them), oldest first, streamed."""
    where = "section IS NOT NULL" if section is None else "section = ?"  # the latter by archive_section
    sql = f"SELECT seq, record FROM archive WHERE {where} ORDER BY seq"
    rows = records(home, create=False).stream(sql, () if section is None else (section,))
    yield from ((seq, record) for seq, text in rows if (record := loaded(text)) is not None)


def entry_records(home: Home, section: str, entry_id: str) -> list[dict]:
    """Every archive record of one section entry (it may leave more than once: a cycle that did not
    save, a restore), oldest first; by the archive's (section, entry_id) index."""
    rows = records(home, create=False).rows(
        "SELECT record FROM archive WHERE section = ? AND entry_id = ? ORDER BY seq", (section, entry_id)
    )
    return [record for (text,) in rows if (record := loaded(text)) is not None]


def sections_left_since(home: Home, first_cycle_id: str) -> Iterator[tuple[str, str, str | None, str | None, str]]:
    """(cycle id, section, entry id, successor, reason) of what left the memory sections in the cycles
    (and operator commands) from `first_cycle_id` on, newest first, streamed. Rows are added under
    the home's lock in the order of their ids' times, so the read goes back from the newest row only
    as far as the first older id: what `agent report` shows of a window costs the same however long
    the archive before it."""
    sql = (
        "SELECT cycle_id, section, entry_id, replaced_by, json_extract(record, '$.reason') FROM archive "
        "WHERE section IS NOT NULL ORDER BY seq DESC"
    )
    for cycle_id, section, entry_id, successor, reason in records(home, create=False).stream(sql):
        if str(cycle_id) < first_cycle_id:
            return
        yield cycle_id, section, entry_id, successor, str(reason)


def highest_ids(home: Home) -> dict[str, int]:
    """The highest id number of each memory section the archive ever received (the `section_id`
    table: raised by the database as each archive row is added, and by `raise_ids`)."""
    return dict(records(home, create=False).rows("SELECT section, highest FROM section_id"))


def raise_ids(home: Home, highest: dict[str, int]) -> None:
    """Raise each section's highest id number to at least `highest`'s (never lowered)."""
    db = records(home)
    with db.write():
        for section, number in highest.items():
            db.execute(
                "INSERT INTO section_id VALUES (?, ?) ON CONFLICT (section) "
                "DO UPDATE SET highest = max(highest, excluded.highest)",
                (section, number),
            )


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


def search(home: Home, query: str, limit: int) -> list[Match]:
    """The best `limit` archived items for the words of `query`, best first (newest first on a tie)."""
    expression = fts_query(query)
    if expression is None:
        return []
    rows = records(home, create=False).rows(
        "SELECT archive.cycle_id, archive.kind, archive.record, archive.section, archive.entry_id FROM (SELECT rowid, rank FROM recall "
        "WHERE recall MATCH ? ORDER BY rank, rowid DESC LIMIT ?) AS found JOIN archive ON archive.seq = found.rowid "
        "ORDER BY found.rank, found.rowid DESC",
        (expression, limit),
    )
    return [
        Match(cycle_id, kind, entry_text(loaded(text) or {}), section, entry_id)
        for cycle_id, kind, text, section, entry_id in rows
    ]


def newest_replaced(home: Home) -> int:
    """The archive's position of the newest state `reset` or `restore` replaced, or current task the
    operator dropped (0: none ever was): a wake that finds a newer one than the newest record saw
    finds the operator's new task, whatever its text."""
    row = records(home, create=False).one(
        "SELECT max(seq) FROM archive WHERE kind IN (?, ?)", (REPLACED_STATE, DROPPED_TASK)
    )
    return int(row[0] or 0)
