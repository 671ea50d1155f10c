"""`agent show --all`: the archive printed in bounded memory, however many years it holds: counted by
one query, then printed one record at a time (agent/store/archive.py), and `--json` written piece
by piece exactly as `print_json` would write it whole (so is `agent history -n 0 --json`)."""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable, Iterator

from agent.cli.common import task_text
from agent.common.escape import escape_controls, escape_tree
from agent.common.plain import plain
from agent.memory.builtin import RULES
from agent.memory.queue_edits import DROPPED_GOAL, QUEUED_TASK
from agent.memory.section_archive import still_held
from agent.store.archive import archived, counts_by_kind, section_records
from agent.store.home import Home

TASK, NOTE = RULES["completed_tasks"].leaves_as, RULES["notes"].leaves_as
_NOTHING = object()


def archived_counts(home: Home) -> dict[str, int]:
    counts = counts_by_kind(home)
    kinds = (TASK, NOTE, QUEUED_TASK, DROPPED_GOAL)
    return {kind: counts.get(kind, 0) for kind in kinds}


# ------------------------------------------------------------------------ memory sections


class SectionArchive:
    """What left the memory sections, by section (in the order they first left), each section's
    records in the order they left; without what a cycle that did not save left: an entry
    active.yaml still holds, an entry a later record of its id supersedes, a text the section
    still holds. One pass finds what to show (a position per archived id: memory grows with
    the ids archived, never with their texts); each section is then read in one more pass."""

    def __init__(self, home: Home, state: dict):
        self.home = home
        last: dict[tuple[str, str], int] = {}  # (section, id) -> the row of its last record
        self.shown: dict[str, set[int]] = {}  # section -> the rows to show (first-seen order)
        for row, record in section_records(home):
            section = record.get("section")
            if not isinstance(section, str) or still_held(record, state):
                continue
            rows = self.shown.setdefault(section, set())
            if isinstance(record.get("id"), str):
                rows.discard(last.get((section, record["id"])))  # superseded by this one
                last[(section, record["id"])] = row
            rows.add(row)
        self.count = sum(len(rows) for rows in self.shown.values())

    def records(self) -> Iterator[dict]:
        """The records to show, by section; streamed."""
        for section, rows in self.shown.items():
            yield from (record for row, record in section_records(self.home, section) if row in rows)

    def lines(self) -> Iterator[str]:
        current = None
        for record in self.records():
            record = escape_tree(record)  # text the model wrote, about to be printed
            if record["section"] != current:
                current = record["section"]
                yield f"  {current}:"
            yield "    " + _section_line(record)


def _section_line(record: dict) -> str:
    value = record.get("value")
    text = value.get("text") if isinstance(value, dict) else value
    head = record.get("id") or "(text)"
    replaced = f" -> {record['replaced_by']}" if record.get("replaced_by") else ""
    return f"{head} [{record.get('reason')}, cycle {record.get('cycle_id', '?')}] {plain(text)}{replaced}"


def task_lines(home: Home) -> Iterator[str]:
    for record in archived(home, TASK):
        record = escape_tree(record)  # text the model wrote, about to be printed
        yield f"  - {task_text(record.get('value'))}  [cycle {record.get('cycle_id', '?')}]"


def queued_lines(home: Home, kind: str = QUEUED_TASK) -> Iterator[str]:
    """The tasks that left the queue without done (dropped by the model or by `agent task drop N`,
    replaced by a restore or a reset), or the goals dropped (kind DROPPED_GOAL: by the model's update,
    or `agent goal drop N`), oldest first, each with its cycle and why."""
    for record in archived(home, kind):
        record = escape_tree(record)  # text the model wrote, about to be printed
        yield f"  - {plain(record.get('value'))}  [cycle {record.get('cycle_id', '?')}: {plain(record.get('reason'))}]"


def note_lines(home: Home) -> Iterator[str]:
    for record in archived(home, NOTE):
        # each line of the note escaped on its own: a note's newlines are its lines, anything else is shown escaped
        yield from (f"  {escape_controls(line)}" for line in plain(record.get("value"), "").split("\n"))


def _indented(value: Any, depth: int) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str).replace("\n", "\n" + "  " * depth)


def json_list(items: Iterable[Any]) -> Iterator[str]:
    """The lines of json.dumps(list(items), indent=2, ensure_ascii=False, default=str), one item at a time."""
    items = iter(items)
    previous = next(items, _NOTHING)
    if previous is _NOTHING:
        yield "[]"
        return
    yield "["
    for item in items:
        yield f"  {_indented(previous, 1)},"
        previous = item
    yield f"  {_indented(previous, 1)}"
    yield "]"


def json_pieces(head: dict[str, Any], lists: dict[str, Callable[[], Iterable[Any]]]) -> Iterator[str]:
    """The lines of json.dumps({**head, **lists}, indent=2, ensure_ascii=False, default=str), each list
    read from its iterable one item at a time."""
    keys = [*head, *lists]
    yield "{"
    for n, key in enumerate(keys):
        comma, name = ("," if n < len(keys) - 1 else ""), json.dumps(key, ensure_ascii=False)
        if key in head:
            yield f"  {name}: {_indented(head[key], 1)}{comma}"
            continue
        items = iter(lists[key]())
        previous = next(items, _NOTHING)
        if previous is _NOTHING:
            yield f"  {name}: []{comma}"
            continue
        yield f"  {name}: ["
        for item in items:
            yield f"    {_indented(previous, 2)},"
            previous = item
        yield f"    {_indented(previous, 2)}"
        yield f"  ]{comma}"
    yield "}"
