"""Bounded memory that loses nothing.

`notes` and `completed_tasks` would otherwise grow every cycle, and so would every prompt. Before
a cycle's state is saved, `bound_memory` keeps the newest notes within a character budget and the
newest completed tasks within a window; what no longer fits goes, in the same step, to the archive
(agent/store/archive.py: rows of logs/agent.db, each tagged with its cycle id, searched by the
recall tool). The archive is committed before the snapshots and active.yaml are written, so a crash
in between can only duplicate, never lose.

The reflect step's edits of the notes (agent/memory/reflect.py) archive what they replace the same
way, as `note` records.
"""

from __future__ import annotations

import copy
import datetime as _dt
import json
from dataclasses import dataclass
from typing import Iterable

from agent.common.tags import Tag
from agent.store.archive import append_archive as append_to_archive
from agent.store.home import Home

ARCHIVE_MARKER = Tag.ARCHIVED.value


@dataclass(frozen=True)
class Archived:
    """One item moved out of active.yaml: a note line or a completed task."""

    kind: str  # "note" | "completed_task" | "queued_task" (memory/queue_edits.py) | "replaced_state" ...
    value: object
    reason: str  # "notes_budget" | "completed_window" | "reflect" | "dropped by the model" ...


# Bounds that hold even when notes_budget or completed_window is null (unbounded): without them
# the state would grow, cycle after cycle, past the size a scratchpad may be loaded at.
HARD_NOTES_CHARS = 256 * 1024
HARD_COMPLETED_BYTES = 1024 * 1024


def bound_memory(state: dict, notes_budget: int | None, completed_window: int | None) -> tuple[dict, list[Archived]]:
    """(state within the limits, what was moved out). Pure: the caller writes the archive.

    The settings are capped by HARD_NOTES_CHARS and HARD_COMPLETED_BYTES, null included."""
    new = copy.deepcopy(state)
    moved: list[Archived] = []
    done = new["completed_tasks"]
    cut = max(len(done) - completed_window, 0) if completed_window is not None else 0
    size = 0
    for index in range(len(done) - 1, cut - 1, -1):  # newest first, until the hard cap
        size += len(json.dumps(done[index], ensure_ascii=False).encode("utf-8", "surrogatepass")) + 1
        if size > HARD_COMPLETED_BYTES:
            cut = index + 1
            break
    if cut:
        moved += [Archived("completed_task", task, "completed_window") for task in done[:cut]]
        new["completed_tasks"] = done[cut:]
    budget = min(notes_budget or HARD_NOTES_CHARS, HARD_NOTES_CHARS)
    if len(new["notes"]) > budget:
        lines = new["notes"].split("\n")
        kept: list[str] = []
        marker_room = 100  # the marker line is short; reserve room for it
        size = 0
        for line in reversed(lines):
            if size + len(line) + 1 > budget - marker_room:
                break
            kept.insert(0, line)
            size += len(line) + 1
        dropped = lines[: len(lines) - len(kept)]
        moved += [Archived("note", line, "notes_budget") for line in dropped]
        marker = f"{ARCHIVE_MARKER} {len(dropped)} older note lines moved to the archive"
        new["notes"] = "\n".join([marker, *kept])
    return new, moved


def archive_records(items: Iterable[Archived], cycle_id: str) -> list[dict]:
    stamp = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    return [
        {"cycle_id": cycle_id, "archived_at": stamp, "kind": item.kind, "reason": item.reason, "value": item.value}
        for item in items
    ]


def append_archive(home: Home, records: list[dict]) -> None:
    append_to_archive(home, records)
