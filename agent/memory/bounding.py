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
import json

from agent.common.tags import Tag
from agent.store.archive import Left

ARCHIVE_MARKER = Tag.ARCHIVED.value


# Bounds that hold even when notes_budget or completed_window is null (unbounded): without them
# the state would grow, cycle after cycle, past the size a scratchpad may be loaded at.
HARD_NOTES_CHARS = 256 * 1024
HARD_COMPLETED_BYTES = 1024 * 1024


def bound_memory(state: dict, notes_budget: int | None, completed_window: int | None) -> tuple[dict, list[Left]]:
    """(state within the limits, what was moved out). Pure: the caller writes the archive.

    The settings are capped by HARD_NOTES_CHARS and HARD_COMPLETED_BYTES, null included."""
    new = copy.deepcopy(state)
    moved: list[Left] = []
    done = new["completed_tasks"]
    cut = max(len(done) - completed_window, 0) if completed_window is not None else 0
    size = 0
    for index in range(len(done) - 1, cut - 1, -1):  # newest first, until the hard cap
        size += len(json.dumps(done[index], ensure_ascii=False).encode("utf-8", "surrogatepass")) + 1
        if size > HARD_COMPLETED_BYTES:
            cut = index + 1
            break
    if cut:
        moved += [Left("completed_task", task, "completed_window") for task in done[:cut]]
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
        moved += [Left("note", line, "notes_budget") for line in dropped]
        marker = f"{ARCHIVE_MARKER} {len(dropped)} older note lines moved to the archive"
        new["notes"] = "\n".join([marker, *kept])
    return new, moved
