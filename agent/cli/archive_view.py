"""`agent show --all`: the archive printed in bounded memory, however many years it holds: counted by
one query, then printed one record at a time (agent/store/archive.py), and `--json` written piece
by piece exactly as `print_json` would write it whole (so is `agent history -n 0 --json`)."""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable, Iterator

from agent.cli.common import task_text
from agent.common.escape import escape_controls, escape_tree
from agent.common.plain import plain
from agent.store.archive import archived, counts_by_kind
from agent.store.home import Home

TASK, NOTE = "completed_task", "note"
_NOTHING = object()


def archived_counts(home: Home) -> dict[str, int]:
    counts = counts_by_kind(home)
    return {TASK: counts.get(TASK, 0), NOTE: counts.get(NOTE, 0)}


def task_lines(home: Home) -> Iterator[str]:
    for record in archived(home, TASK):
        record = escape_tree(record)  # text the model wrote, about to be printed
        yield f"  - {task_text(record.get('value'))}  [cycle {record.get('cycle_id', '?')}]"


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
