"""`agent show --all`: the archive (logs/archive.jsonl) printed in bounded memory, however many years
it holds: counted in one streaming pass, then printed in another, one record at a time
(agent/store/tail.py), and `--json` written piece by piece exactly as `print_json` would write it whole."""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable, Iterator

from agent.cli.common import task_text
from agent.common.escape import escape_controls, escape_tree
from agent.common.plain import plain
from agent.store.home import Home
from agent.store.tail import records_forwards

TASK, NOTE = "completed_task", "note"
_NOTHING = object()


def archived(home: Home, kind: str) -> Iterator[dict]:
    """The archive's records of one kind, oldest first, streamed."""
    return (r for r in records_forwards(home.archive, "kind") if r.get("kind") == kind)


def archived_counts(home: Home) -> dict[str, int]:
    counts = {TASK: 0, NOTE: 0}
    for record in records_forwards(home.archive, "kind"):
        if record.get("kind") in counts:
            counts[record["kind"]] += 1
    return counts


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
