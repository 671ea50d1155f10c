"""What leaves a section, in the archive: written before the state that lost it is saved (by the
archive's one writer, `agent.store.archive.archive`, like everything that leaves memory), and read
back by `recall` and `agent show --all` by section and id.

Each list entry that leaves is one archive record `{"kind": "section_entry", "section": "known",
"id": "known-12", "reason": ..., "replaced_by": "known-20" (a consolidation's successor), "value":
the whole entry, "cycle_id", "archived_at"}`, a row of logs/agent.db's `archive` table beside the
notes, tasks and goals that leave memory, its section, id and successor in columns of that row;
a text section's old text is a `section_text` record without an id.

Ids are never issued twice. The counters in active.yaml (`section_ids`) are the operator's to
edit, so the database also keeps, in its `section_id` table, the highest id of each section that
ever reached the archive (a successor named in `replaced_by` included): raised by the database
itself in the transaction that adds the row, so it cannot lag the archive; at wake each counter
is raised to it (`section_settle.settle`'s floor).

A cycle that did not save (killed between the archive and active.yaml) leaves records of entries
active.yaml still holds: readers skip a record whose entry is still in its section, and of two
records of one id they show the last (ids are never reused: only the record of the saving cycle
can follow one that did not save).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from agent.memory.sections import raised_ids
from agent.state import SECTION_IDS_KEY
from agent.store.archive import highest_ids, raise_ids

if TYPE_CHECKING:
    from agent.store.home import Home


def keep_ids(home: Home, state: object) -> None:
    """Before a state is replaced whole (`agent restore`, `agent reset`; it is archived as it is):
    raise the high-water mark past every id it holds or its counters reached, so a restored older
    state never issues one of them again. Writes nothing for a state without section ids."""
    if not isinstance(state, dict):
        return
    found = [
        item.get("id")
        for value in state.values()
        if isinstance(value, list)
        for item in value
        if isinstance(item, dict)
    ]
    counters = state.get(SECTION_IDS_KEY)
    if isinstance(counters, dict):
        found += [f"{name}-{n}" for name, n in counters.items() if isinstance(n, int) and n > 0]
    mark = highest_ids(home)
    raised = raised_ids(mark, found)
    if raised != mark:
        raise_ids(home, raised)


def still_held(record: dict, state: dict) -> bool:
    """Whether `state` still holds what an archive record says left a section (so a cycle that did
    not save wrote the record): the entry of its id, or, for a text, that text."""
    section, value = record.get("section"), record.get("value")
    held = state.get(section) if isinstance(section, str) else None
    if isinstance(record.get("id"), str):
        return isinstance(held, list) and any(isinstance(e, dict) and e.get("id") == record["id"] for e in held)
    return isinstance(held, str) and isinstance(value, str) and bool(value) and value in held


def added_rows(before: dict, after: dict, specs: Iterable, cycle_id: str, route: str) -> list[tuple]:
    """The provenance rows (agent/store/provenance.py) of the list entries `after` holds whose ids
    `before` does not: (section, id, cycle id, route, {by, merged_from}). Pure."""
    rows = []
    for spec in specs:
        if not spec.is_list:
            continue
        had = {e.get("id") for e in before.get(spec.name) or [] if isinstance(e, dict)}
        for entry in after.get(spec.name) or []:
            if isinstance(entry, dict) and isinstance(entry.get("id"), str) and entry["id"] not in had:
                record = {"by": entry.get("by")}
                if isinstance(entry.get("merged_from"), list):
                    record["merged_from"] = entry["merged_from"]
                rows.append((spec.name, entry["id"], cycle_id, route, record))
    return rows
