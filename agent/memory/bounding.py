"""Bounded memory that loses nothing.

`notes` and `completed_tasks` would otherwise grow every cycle, and so would every prompt. Before
a cycle's state is saved, `bound_memory` keeps the newest notes within a character budget and the
newest completed tasks within a window; what no longer fits goes, in the same step, to the archive
(agent/store/archive.py: rows of logs/agent.db, each tagged with its cycle id, searched by the
recall tool). The archive is committed before the snapshots and active.yaml are written, so a crash
in between can only duplicate, never lose.

The optional reflect step (after `done`) lets the model curate `notes` with APPEND / REPLACE /
CLEAR; whatever it replaces or clears is archived first, and a reflection that fails or breaks an
invariant is dropped, keeping the unreflected state.
"""

from __future__ import annotations

import copy
import datetime as _dt
import json
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from agent.common.safe_yaml import dump_yaml
from agent.common.tags import Tag
from agent.memory.one_call import ask_once
from agent.models.replies import ReplyError
from agent.secrets import Secrets
from agent.state import InvariantViolation, invariant_problems
from agent.store.archive import append_archive as append_to_archive
from agent.store.home import Home
from agent.tools import Tool

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


def apply_curation(state: dict, instruction: str) -> tuple[dict, list[Archived]]:
    """The reflect step's edit of notes: "APPEND: text", "CLEAR", or a replacement text."""
    new = copy.deepcopy(state)
    text = instruction.strip()
    if text.upper().startswith("APPEND:"):
        addition = text[len("APPEND:") :].strip()
        if addition:
            new["notes"] = f"{new['notes']}\n{addition}" if new["notes"] else addition
        return new, []
    old_lines = [line for line in new["notes"].split("\n") if line] if new["notes"] else []
    archived = [Archived("note", line, "reflect") for line in old_lines]
    new["notes"] = "" if text.upper() == "CLEAR" else text
    return new, archived


REFLECT_RULES = """# Reflect

The cycle's work is done. Now curate the notes so the next cycle starts from a short, useful memory.
Reply with one JSON object: {"tool": "curate_notes", "args": {"notes": "..."}} where notes is one of:

- "APPEND: <text>" to add a line (use this when the notes are already short and clear);
- a full replacement: a short, structured summary of the facts worth keeping, one per line,
  for example "Known: ...", "Open: ...", "Next: ...";
- "CLEAR" when nothing in the notes is worth keeping.

Replaced or cleared lines are archived, not lost. Keep what the next task needs; drop tool chatter.
"""


def curate_tool():
    """The reflect step's only tool; its schema constrains the model's reply."""
    return Tool(
        name="curate_notes",
        description='New notes: "APPEND: text", a replacement text, or "CLEAR".',
        args_schema={
            "type": "object",
            "properties": {"notes": {"type": "string"}},
            "required": ["notes"],
            "additionalProperties": False,
        },
    )


def reflect_prompt(state: dict) -> str:
    return (
        "\n".join(
            [
                "## Scratchpad",
                "",
                "```yaml",
                dump_yaml(state).rstrip(),
                "```",
                "",
                "Curate the notes now. Reply with one JSON action.",
            ]
        )
        + "\n"
    )


def archive_records(items: Iterable[Archived], cycle_id: str) -> list[dict]:
    stamp = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    return [
        {"cycle_id": cycle_id, "archived_at": stamp, "kind": item.kind, "reason": item.reason, "value": item.value}
        for item in items
    ]


def append_archive(home: Home, records: list[dict]) -> None:
    append_to_archive(home, records)


def reflect_sections(
    model: Any,
    before: dict,
    state: dict,
    sections: Any,
    usage: Any,
    log: Callable[[str], None],
    timeout: float | None = None,
    secrets: Secrets | None = None,
) -> tuple[dict, list, str]:
    """Reflect for a home with sections (seed 000's second phase): one more model call whose only tool
    is update_scratchpad over the writable sections and notes, under every rule of an update
    (`sections`: the cycle's Edits; what may leave a list counts from the cycle's start). Returns
    (state, what left: notes lines and section entries, status); any failure or refusal keeps the
    unreflected state, and an interrupt is not caught."""
    from agent.memory.sections import REFLECT_RULES, reflect_tool  # only a home with sections reflects this way

    redact = secrets.redact if secrets else (lambda value: value)
    try:
        prompt = reflect_sections_prompt(redact(state), sections.specs)
        tool = reflect_tool(sections.specs)
        args = ask_once(
            model, REFLECT_RULES, prompt, tool, usage, log, purpose="reflect", timeout=timeout, secrets=secrets
        )
        edits = {k: v for k, v in args.items() if k != "notes"}
        curated, moved = apply_curation(state, args["notes"]) if "notes" in args else (state, [])
        change = sections.apply(curated, redact(edits))
        if change.refusal:
            raise ReplyError(f"update_scratchpad refused: {change.refusal}")
        broken = invariant_problems(before, change.state) + sections.problems(change.state)
        if broken:
            raise InvariantViolation("; ".join(broken))
    except Exception as exc:
        log(f"reflect step failed, keeping the unreflected state: {type(exc).__name__}: {exc}")
        return state, [], f"kept unreflected: {type(exc).__name__}: {exc}"
    log(f"reflect: {'; '.join(change.notes) or 'no section changed'} ({len(moved)} note line(s) archived)")
    return change.state, [*moved, *change.leaving], "applied"


def reflect_sections_prompt(state: dict, specs: Any) -> str:
    """What reflect with sections is shown: the memory block, then the rest of the scratchpad (the
    task, the queue, the notes with what this cycle did), then what to do."""
    from agent.memory.sections import render

    rest = {
        k: v for k, v in state.items() if k not in {s.name for s in specs} and k not in ("section_ids", "last_updated")
    }
    return (
        "\n".join(
            [
                render(state, specs).rstrip(),
                "",
                "## Scratchpad",
                "",
                "```yaml",
                dump_yaml({k: v for k, v in rest.items() if v not in (None, "", [], {})}).rstrip(),
                "```",
                "",
                "Update the memory now: only the sections that changed. Reply with one JSON action.",
            ]
        )
        + "\n"
    )


def reflect(
    model: Any,
    before: dict,
    state: dict,
    usage: Any,
    log: Callable[[str], None],
    timeout: float | None = None,
    secrets: Secrets | None = None,
) -> tuple[dict, list[Archived], str]:
    """After done: one more model call that curates notes, within `timeout` seconds (the time budget
    left; None: no budget). Returns (state, archived, status). The model is shown the state with
    `secrets` redacted, like every prompt of the loop.

    Any failure keeps the unreflected state (status says why); an interrupt is not caught.
    """
    redact = secrets.redact if secrets else (lambda value: value)
    try:
        prompt = reflect_prompt(redact(state))
        args = ask_once(
            model, REFLECT_RULES, prompt, curate_tool(), usage, log, purpose="reflect", timeout=timeout, secrets=secrets
        )
        curated, moved = apply_curation(state, args["notes"])
        broken = invariant_problems(before, curated)
        if broken:
            raise InvariantViolation("; ".join(broken))
    except Exception as exc:
        log(f"reflect step failed, keeping the unreflected state: {type(exc).__name__}: {exc}")
        return state, [], f"kept unreflected: {type(exc).__name__}: {exc}"
    log(f"reflect: notes curated ({len(moved)} line(s) archived)")
    return curated, moved, "applied"
