"""The built-in sections: msa's five fields (`notes`, `completed_tasks`, `goals` and the queue) as
sections of the machinery operator sections use, each with its kind, limit and rules (`RULES`).

    notes            a text section (`NOTES`): edited with the sections' grammar (agent/memory/
                     reflect.py), within `notes_budget` characters once settled
    completed_tasks  an append-only list, within `completed_window` entries once settled

Settling at sleep (`settle_at_sleep`), before a cycle's state is saved: the newest notes kept
within the budget, the oldest lines cut by the rule every text section's lines are cut by
(`oldest_lines_over`), a marker line saying how many left; the newest completed tasks kept within
the window. What no longer fits goes, in the same step, to the archive (agent/store/archive.py:
rows of logs/agent.db, each tagged with its cycle id, searched by the recall tool): one `Left` per
line or task, as notes always were. The archive is committed before the snapshots and active.yaml
are written, so a crash in between can only duplicate, never lose.

    goals            the operator's list: the model may replace it whole (update_scratchpad, as in
                     msa); a goal it drops is archived (kind `goal`) and told in a note
    current_task     the queue, the operator's: advanced by an accepted `done` (the task moves to
    pending_actions  completed_tasks); the model may edit it (msa's whole-list `pending_actions`
                     replacement included), and a task that leaves it without `done` (dropped,
                     renamed away, replaced) is archived (kind `queued_task`) and told in a note
                     the next prompt and `status` show (agent/memory/queue_edits.py compares the
                     two queues, agent/cycle/work.py notes it; sleep archives it with the rest)

Nothing leaves a built-in section without a `Left` in the archive, whatever the route. Each of
them keeps in active.yaml the plain string or list msa wrote (no ids, no runtime fields: a plain
entry's provenance is in agent.db, agent/store/provenance.py): a home without operator sections
reads and writes exactly msa's six fields, and its prompt shows them as msa's scratchpad.

The steps of a cycle over all of a home's sections: `Memory` (agent/memory/specs.py). Here, below
every section module: the built-in specs and rules, settling at sleep, and what a change of any
section is (`Stamp`, `Change`).
"""

from __future__ import annotations

import copy
import datetime as _dt
import json
from collections import Counter
from dataclasses import dataclass

from agent.common.cycle_ids import SECOND_FORMAT, cycle_started
from agent.common.tags import Tag
from agent.setting_checks import SectionSpec
from agent.state import MAX_FIELD_BYTES
from agent.store.archive import Left

ARCHIVE_MARKER = Tag.ARCHIVED.value
MARKER_ROOM = 100  # a text's marker line is short: its room is kept out of the budget

# Bounds that hold even when notes_budget or completed_window is null (unbounded): without them
# the state would grow, cycle after cycle, past the size a scratchpad may be loaded at.
HARD_NOTES_CHARS = 256 * 1024
HARD_COMPLETED_BYTES = 1024 * 1024

# The notes as the one grammar sees them at an edit: a text within the hard cap (notes_budget
# applies when it settles, at sleep).
NOTES = SectionSpec("notes", "text", HARD_NOTES_CHARS)


@dataclass(frozen=True)
class Rules:
    """How a built-in section is written and what leaves it."""

    owner: str  # "model": its entries are the model's; "operator": what the model drops is archived and told
    edit: str  # what update_scratchpad does with the model's value: "replace" it whole (msa's), "append" only
    leaves_as: str  # the archive kind (`Left.kind`) of what leaves it


# The operator's built-in sections: no count of their own, each value within what one
# update_scratchpad value may hold (MAX_FIELD_BYTES, bytes), as msa's fields always were.
GOALS = SectionSpec("goals", "list", MAX_FIELD_BYTES, "the operator's goals")
CURRENT_TASK = SectionSpec("current_task", "text", MAX_FIELD_BYTES, "the queue's head: what this cycle works on")
PENDING_ACTIONS = SectionSpec("pending_actions", "list", MAX_FIELD_BYTES, "the queue behind the current task")

# Every built-in section's rules, in active.yaml's order (the limits of notes and completed_tasks
# are settings: `builtin_specs`; the notes take the one grammar at reflect, agent/memory/reflect.py).
RULES = {
    "goals": Rules("operator", "replace", "goal"),
    "current_task": Rules("operator", "replace", "queued_task"),
    "pending_actions": Rules("operator", "replace", "queued_task"),
    "completed_tasks": Rules("model", "append", "completed_task"),
    "notes": Rules("model", "replace", "note"),
}


def missing(before: list[str], after: list[str]) -> list[str]:
    """The texts of `before` that `after` does not hold, in `before`'s order. A text is told by itself
    alone: a duplicate is a second text equal to the first, counted (one of two equal tasks dropped
    is missing once, a reordering misses nothing), and a rename misses the old text."""
    held = Counter(after)
    gone = []
    for text in before:
        if held[text] > 0:
            held[text] -= 1
        else:
            gone.append(text)
    return gone


def notes_left(before: dict, after: dict, reason: str) -> list[Left]:
    """The lines of `before`'s notes that `after`'s no longer hold (an update that replaced the
    notes), each a `note` to archive; duplicates counted, an appended line costs nothing."""
    lines = missing(str(before.get("notes") or "").split("\n"), str(after.get("notes") or "").split("\n"))
    return [Left(RULES["notes"].leaves_as, line, reason) for line in lines if line]


def builtin_specs(notes_budget: int | None, completed_window: int | None) -> tuple[SectionSpec, SectionSpec]:
    """The built-in sections as they settle: notes within `notes_budget` (capped by
    HARD_NOTES_CHARS, null included), completed tasks within `completed_window` (null: no count,
    HARD_COMPLETED_BYTES still)."""
    notes = SectionSpec("notes", "text", min(notes_budget or HARD_NOTES_CHARS, HARD_NOTES_CHARS))
    window = completed_window if completed_window is not None else HARD_COMPLETED_BYTES
    return notes, SectionSpec("completed_tasks", "list", window)


def oldest_lines_over(lines: list[str], limit: int) -> int:
    """How many of the first `lines` must go for the rest, joined by newlines, to fit `limit`
    characters (one pass from the newest line back)."""
    size = -1
    for index in range(len(lines) - 1, -1, -1):
        size += len(lines[index]) + 1
        if size > limit:
            return index + 1
    return 0


def settle_at_sleep(state: dict, notes_budget: int | None, completed_window: int | None) -> tuple[dict, list[Left]]:
    """(state with its built-in sections within their limits, what was moved out). Pure: the caller
    writes the archive. Nothing over a limit: the state as given, equal and unchanged."""
    notes_spec, completed_spec = builtin_specs(notes_budget, completed_window)
    new = copy.deepcopy(state)
    moved = _settle_completed(new, completed_spec) + _settle_notes(new, notes_spec)
    return new, moved


def _settle_completed(state: dict, spec: SectionSpec) -> list[Left]:
    """The newest tasks within the window and within HARD_COMPLETED_BYTES, the older ones archived."""
    done = state[spec.name]
    cut = max(len(done) - spec.limit, 0)
    size = 0
    for index in range(len(done) - 1, cut - 1, -1):  # newest first, until the hard cap
        size += len(json.dumps(done[index], ensure_ascii=False).encode("utf-8", "surrogatepass")) + 1
        if size > HARD_COMPLETED_BYTES:
            cut = index + 1
            break
    if not cut:
        return []
    state[spec.name] = done[cut:]
    return [Left(RULES[spec.name].leaves_as, task, "completed_window") for task in done[:cut]]


def _settle_notes(state: dict, spec: SectionSpec) -> list[Left]:
    """The newest lines within the budget less the marker's room, the older ones archived line by line."""
    text = state[spec.name]
    if len(text) <= spec.limit:
        return []
    lines = text.split("\n")
    cut = oldest_lines_over(lines, spec.limit - MARKER_ROOM - 1)
    state[spec.name] = "\n".join([f"{ARCHIVE_MARKER} {cut} older note lines moved to the archive", *lines[cut:]])
    return [Left(RULES[spec.name].leaves_as, line, "notes_budget") for line in lines[:cut]]


# --------------------------------------------------------------------------- one path for all


@dataclass(frozen=True)
class Stamp:
    """When a change happens: the id of the cycle (or the operator command's second, in the same
    form) that entries it adds record as `added`, and the UTC day a statement counts for."""

    cycle: str
    day: str

    @classmethod
    def of(cls, cycle_id: str | None = None, now: _dt.datetime | None = None) -> "Stamp":
        """The stamp of cycle `cycle_id` (its day is the one its id names); without one, an operator's
        stamp for `now` (default: the current time)."""
        started = cycle_started(cycle_id) if cycle_id else None
        if started is not None:
            return cls(cycle_id, started.date().isoformat())
        now = now or _dt.datetime.now(_dt.timezone.utc)
        return cls(now.strftime(SECOND_FORMAT), now.date().isoformat())


@dataclass(frozen=True)
class Change:
    """What a change of sections came to. Refused: `refusal` says why (to the model, or to the
    operator) and `state` is the state as given; nothing left."""

    state: dict
    leaving: tuple[Left, ...] = ()
    notes: tuple[str, ...] = ()  # one line per thing done, for the [UPDATE] note or a command's output
    refusal: str | None = None
