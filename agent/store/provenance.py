"""Provenance: where each memory section entry came from, as the runtime saw it.

One row per (section, entry id) of logs/agent.db's `provenance` table (migration m006): the cycle
(or operator command) that added the entry and its route, one of ROUTES, with a small record (a
successor's sources). The model writes only the state, never the database, so it cannot forge
any of it; a hand edit of active.yaml's runtime fields (`added`, `by`) leaves this row as it was.
A row is written in the transaction that archives what left memory, before the state is saved;
an id a cycle that did not save had issued is issued again, and its row replaced by the next save's.
"""

from __future__ import annotations

import json
from typing import Iterable

from agent.store.db import records
from agent.store.home import Home
from agent.store.rows import loaded

# operator: `agent memory add` applied at once; inbox: an operator's edit that waited in the inbox,
# applied by the next command; wake: applied at a cycle's wake (a queued edit, or an entry written
# by hand into active.yaml, adopted); model: update_scratchpad in the loop; reflect; consolidation.
ROUTES = ("operator", "inbox", "wake", "model", "reflect", "consolidation")


def add_provenance(home: Home, rows: Iterable[tuple[str, str, str, str, dict]]) -> None:
    """(section, entry id, cycle id, route, record) rows, each replacing any row of its id."""
    rows = list(rows)
    if not rows:
        return
    db = records(home)
    with db.write():
        for section, entry_id, cycle_id, route, record in rows:
            db.execute(
                "INSERT OR REPLACE INTO provenance (section, entry_id, format, cycle_id, route, record) "
                "VALUES (?, ?, 1, ?, ?, ?)",
                (section, entry_id, cycle_id, route, json.dumps(record, ensure_ascii=False)),
            )


def provenance_of(home: Home, section: str, entry_id: str) -> dict | None:
    """{cycle_id, route, ...record} of one entry, or None when the runtime recorded none (an entry
    older than the table, or one no save kept)."""
    found = records(home, create=False).one(
        "SELECT cycle_id, route, record FROM provenance WHERE section = ? AND entry_id = ?", (section, entry_id)
    )
    if found is None:
        return None
    return {**(loaded(found[2]) or {}), "cycle_id": found[0], "route": found[1]}
