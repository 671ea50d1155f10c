"""Provenance: where each memory entry came from, as the runtime saw it.

One row per (section, entry id) of logs/agent.db's `provenance` table (migration m006): the cycle
(or operator command) that added the entry and its route, one of ROUTES, with a small record (a
successor's sources; for the model's and reflect's entries, `read`: where each tool result it had
read came from, agent/tools/origins.py). A list section's entry is keyed by its id; a plain entry
(a notes line, a completed task, a task of the queue), which has none, by its text as read and its
occurrence (`plain_keys`), so active.yaml keeps msa's six fields as they are. The `workspace_write`
table (m007) keeps what the model's file tools last wrote at each path, so a later read knows its
own writing (`model_wrote`). The model writes only the state, never the database, so it cannot forge
any of it; a hand edit of active.yaml's runtime fields (`added`, `by`) leaves this row as it was.
A row is written in the transaction that archives what left memory, before the state is saved;
an id a cycle that did not save had issued is issued again, and its row replaced by the next save's.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
import stat
from pathlib import Path
from typing import Iterable

from agent.common.cycle_ids import SECOND_FORMAT
from agent.common.reading import as_read
from agent.store.db import records
from agent.store.home import Home
from agent.store.rows import loaded

# operator: `agent memory add` applied at once; inbox: an operator's edit that waited in the inbox,
# applied by the next command; wake: applied at a cycle's wake (a queued edit, or an entry written
# by hand into active.yaml, adopted); model: update_scratchpad in the loop; reflect; consolidation.
ROUTES = ("operator", "inbox", "wake", "model", "reflect", "consolidation")
_PLAIN_KEY = re.compile(r"[0-9a-f]{16}\.[0-9]+")  # a plain entry's key (`plain_keys`); a section's id is NAME-N


def add_provenance(home: Home, rows: Iterable[tuple[str, str, str, str, dict]]) -> None:
    """(section, entry id, cycle id, route, record) rows. A section entry's replaces any row of its id
    (an id a cycle that did not save had issued is issued again); a plain entry's, keyed by its text,
    never replaces one: the row says where that text was first written, so writing it again after it
    left (having read nothing this time) cannot wash out where it came from."""
    rows = list(rows)
    if not rows:
        return
    db = records(home)
    kept: dict[str, list[str]] = {}  # a `read` list as JSON -> the plain row of this call that holds it
    with db.write():
        for section, entry_id, cycle_id, route, record in rows:
            plain = bool(_PLAIN_KEY.fullmatch(entry_id))
            read = json.dumps(record.get("read"), ensure_ascii=False) if isinstance(record.get("read"), list) else None
            if read is not None and read in kept:  # the same list as a row of this call: said once
                record = {**{k: v for k, v in record.items() if k != "read"}, "read_as": kept[read]}
            cursor = db.execute(
                f"{'INSERT OR IGNORE' if plain else 'INSERT OR REPLACE'} INTO provenance "
                "(section, entry_id, format, cycle_id, route, record) VALUES (?, ?, 1, ?, ?, ?)",
                (section, entry_id, cycle_id, route, json.dumps(record, ensure_ascii=False)),
            )
            if plain and read is not None and "read" in record and cursor.rowcount == 1:  # a row never replaced
                kept.setdefault(read, [section, entry_id])


def provenance_of(home: Home, section: str, entry_id: str) -> dict | None:
    """{cycle_id, route, ...record} of one entry, or None when the runtime recorded none (an entry
    older than the table, or one no save kept). A row whose `read` is the same list as a row written with it says so by
    `read_as` (that row's section and key, a plain row, never replaced), read back here."""
    found = records(home, create=False).one(
        "SELECT cycle_id, route, record FROM provenance WHERE section = ? AND entry_id = ?", (section, entry_id)
    )
    if found is None:
        return None
    record = loaded(found[2]) or {}
    pointer = record.pop("read_as", None)
    if "read" not in record and isinstance(pointer, list) and len(pointer) == 2 and pointer != [section, entry_id]:
        held = records(home, create=False).one(
            "SELECT record FROM provenance WHERE section = ? AND entry_id = ?", tuple(map(str, pointer))
        )
        read = (loaded(held[0]) or {}).get("read") if held is not None else None
        if isinstance(read, list):
            record["read"] = read
    return {**record, "cycle_id": found[0], "route": found[1]}


# ------------------------------------------------------------------------- the model's own files

# The columns a cycle reads and writes (migrations m006, m007).
_COLUMNS = {
    "provenance": "section, entry_id, format, cycle_id, route, record",
    "workspace_write": "path, format, cycle_id, sha256, size, record",
}


def check_tables(home: Home) -> None:
    """DiskError (exit 7, one line) when logs/agent.db's provenance tables are not of the shape the
    cycle writes (a hand-made or hostile database): a cycle checks before it runs, so its tools never
    meet it halfway."""
    db = records(home)
    present = {name for (name,) in db.rows("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for table, columns in _COLUMNS.items():
        if table in present:  # one dropped is met, and said, where it is written
            db.rows(f"SELECT {columns} FROM {table} WHERE 0")


def record_write(home: Home, path: str, data: bytes, cycle_id: str, after: list[dict]) -> None:
    """The model's file tool wrote `data` at workspace `path` in `cycle_id`, after reading what `after`
    says (the origins of what it had read in that cycle): replaces the path's row. The same bytes
    written again keep the first write's cycle and what it had read, with this write's added (at most
    MAX_WRITE_ORIGINS, then a count): writing a file over with what it holds cannot wash out its origin."""
    digest = hashlib.sha256(data).hexdigest()
    db = records(home)
    with db.write():
        found = db.one("SELECT cycle_id, sha256, record FROM workspace_write WHERE path = ?", (path,))
        if found is not None and found[1] == digest:
            earlier = (loaded(found[2]) or {}).get("after")
            cycle_id, after = found[0], _merged(earlier if isinstance(earlier, list) else [], after)
        db.execute(
            "INSERT OR REPLACE INTO workspace_write (path, format, cycle_id, sha256, size, record) VALUES (?, 1, ?, ?, ?, ?)",
            (path, cycle_id, digest, len(data), json.dumps({"after": after})),
        )


MAX_WRITE_ORIGINS = 20  # as agent/tools/origins.py MAX_ORIGINS


def _merged(earlier: list, later: list) -> list[dict]:
    """Two writes' origins as one list: each once, the first write's first, at most MAX_WRITE_ORIGINS
    (then {"origin": "more", "count": N})."""
    merged: list[dict] = []
    more = 0
    for item in [*earlier, *later]:
        if not isinstance(item, dict):
            continue
        if item.get("origin") == "more":
            more += item["count"] if isinstance(item.get("count"), int) else 0
        elif item not in merged:
            if len(merged) < MAX_WRITE_ORIGINS:
                merged.append(item)
            else:
                more += 1
    return merged + ([{"origin": "more", "count": more}] if more else [])


def model_wrote(home: Home, path: str, target: Path) -> dict | None:
    """{cycle_id, after} when the file at workspace `path` (`target` on disk) holds exactly the bytes
    the model's file tools last wrote there; None when they never wrote it or it changed since (a
    shell command, a person, another program: not the model's writing as far as the runtime knows)."""
    found = records(home, create=False).one(
        "SELECT cycle_id, sha256, size, record FROM workspace_write WHERE path = ?", (path,)
    )
    if found is None:
        return None
    try:
        if target.stat().st_size != found[2]:
            return None
        digest = hashlib.sha256(target.read_bytes()).hexdigest()
    except OSError:
        return None
    if digest != found[1]:
        return None
    after = (loaded(found[3]) or {}).get("after")
    return {"cycle_id": found[0], "after": after if isinstance(after, list) else []}


def drop_stale_writes(home: Home, workspace: Path) -> int:
    """Delete the `workspace_write` rows of files that are gone or no longer of the size written
    (they can never read as the model's own again), so the table holds at most a row per file the
    workspace has: how many went. Only stats the files (no hashing); a prune calls it."""
    db = records(home, create=False)
    stale = []
    for path, size in db.rows("SELECT path, size FROM workspace_write"):
        try:
            info = (workspace / path).stat()
        except (OSError, ValueError):
            stale.append(path)
            continue
        if not stat.S_ISREG(info.st_mode) or info.st_size != size:
            stale.append(path)
    for start in range(0, len(stale), 500):
        batch = stale[start : start + 500]
        with db.write():
            db.execute(f"DELETE FROM workspace_write WHERE path IN ({','.join('?' * len(batch))})", batch)
    return len(stale)


# ------------------------------------------------------------------------------ plain entries

# A plain entry's section: `notes` (one entry a line), `completed_tasks`, and `queue` (the current
# task, then the pending actions: a task moving up the queue is the same entry).
PLAIN_SECTIONS = ("notes", "completed_tasks", "queue", "goals")


def _digest(read: str) -> str:
    return hashlib.sha256(read.encode("utf-8")).hexdigest()[:16]


def plain_keys(section: str, texts: Iterable[str]) -> list[tuple[str, str]]:
    """(section, key) of each text, in order. A key is the SHA-256 of the text as a person reads it
    (agent/common/reading.py), 16 hex digits, and which occurrence of that text in its section it is:
    `3f2a9c1b7e4d5a60.1`, then `.2` for a second line that reads the same."""
    seen: dict[str, int] = {}
    keys = []
    for text in texts:
        read = as_read(text)
        seen[read] = seen.get(read, 0) + 1
        keys.append((section, f"{_digest(read)}.{seen[read]}"))
    return keys


def task_routes(home: Home, state: dict) -> list[str | None]:
    """The route of each task of `state`'s queue (the current task, then the pending ones) and of each
    goal, None for one with no row (the operator's command, written by hand, or older than the record)."""
    db = records(home, create=False)
    if db.one("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'provenance'") is None:
        return [None] * sum(len(v) for k, v in plain_texts(state).items() if k in ("queue", "goals"))
    texts, routes = plain_texts(state), []
    for section, key in plain_keys("queue", texts["queue"]) + plain_keys("goals", texts["goals"]):
        found = db.one("SELECT route FROM provenance WHERE section = ? AND entry_id = ?", (section, key))
        routes.append(None if found is None else found[0])
    return routes


def _task_text(entry: object) -> str:
    if isinstance(entry, dict):
        return json.dumps(entry, ensure_ascii=False, sort_keys=True)
    return entry if isinstance(entry, str) else json.dumps(entry, ensure_ascii=False)


def plain_texts(state: dict) -> dict[str, list[str]]:
    """The plain entries of a state by section, as keyed: the notes' lines, each completed task, the queue, the goals."""
    notes = state.get("notes")
    queue = [state["current_task"]] if isinstance(state.get("current_task"), str) and state["current_task"] else []
    return {
        "notes": [line for line in notes.splitlines() if line.strip()] if isinstance(notes, str) else [],
        "completed_tasks": [_task_text(e) for e in state.get("completed_tasks") or []],
        "queue": queue + [_task_text(e) for e in state.get("pending_actions") or []],
        "goals": [_task_text(e) for e in state.get("goals") or []],
    }


def plain_entry_keys(state: dict, sections: Iterable[str] = PLAIN_SECTIONS) -> set[tuple[str, str]]:
    """Every (section, key) of a state's plain entries (of `sections` only, when given)."""
    texts = plain_texts(state)
    return {key for section in sections for key in plain_keys(section, texts[section])}


def operator_stamp() -> str:
    """An operator command's stamp, in a cycle id's form: its UTC second."""
    return _dt.datetime.now(_dt.timezone.utc).strftime(SECOND_FORMAT)


def queued_rows(before: dict | None, after: dict, cycle_id: str, route: str) -> list[tuple]:
    """The provenance rows of the tasks `after` queues that `before` did not (an operator's edit: the
    command's own, the inbox's, or applied at a cycle's wake). The queue only: the notes such an edit
    leaves are the runtime's ([INBOX] lines), never the operator's entries."""
    if before is None:
        return []
    new = plain_entry_keys(after, ("queue",)) - plain_entry_keys(before, ("queue",))
    return [(*key, cycle_id, route, {}) for key in sorted(new)]
