"""What sections show: the prompt's block (`render`: each section with its fill and description, a
list's entries with their ids and days, the most stable first), and what a person should know
(`surfaced`, `surfaced_summary`: the `surface: true` sections, for `agent status`, the record, the
hook and the metrics). Entries and ids: agent/memory/sections.py.
"""

from __future__ import annotations

from typing import Iterable

from agent.common.escape import escape_controls
from agent.memory.sections import OPERATOR, entries_of, fill, shown_entries, text_of
from agent.setting_checks import SectionSpec, by_stability


def render(state: dict, specs: Iterable[SectionSpec]) -> str:
    """The prompt's block of sections: each with its fill and description, a list's entries with
    their id and days; the most stable first (read-only, text, lists). Only the state and the specs
    decide it, so equal memory renders to equal bytes. No sections: ''."""
    specs = by_stability(tuple(specs))
    if not specs:
        return ""
    blocks = []
    for spec in specs:
        gauge = fill(state, spec) + (", read-only" if spec.read_only else "")
        lines = [f"### {spec.name} ({gauge})"]
        if spec.description:
            lines.append(escape_controls(spec.description))
        lines += _list_lines(state, spec) if spec.is_list else _text_lines(state, spec)
        blocks.append("\n".join(lines))
    return "## Memory\n\n" + "\n\n".join(blocks) + "\n"


def _list_lines(state: dict, spec: SectionSpec) -> list[str]:
    entries = entries_of(state, spec)
    if not entries:
        return ["(empty)"]
    lines = []
    for entry in entries:
        days = entry.get("days", 1)
        tags = [escape_controls(entry.get("id")), f"{days} day{'s' if days != 1 else ''}"]
        if entry.get("by") == OPERATOR:
            tags.append("operator")
        lines.append(f"- [{', '.join(tags)}] {escape_controls(entry.get('text', ''))}")
    return lines


def _text_lines(state: dict, spec: SectionSpec) -> list[str]:
    text = text_of(state, spec)
    return [f"  {escape_controls(line)}" for line in text.split("\n")] if text else ["(empty)"]


def surfaced(state: dict, specs: Iterable[SectionSpec]) -> list[dict]:
    """What the agent wants a person to know: the entries (or the text) of every `surface: true`
    section, for `agent status`, the hook's record and the metrics' count."""
    found = []
    for spec in specs:
        if not spec.surface:
            continue
        if spec.is_list:
            found += [
                {"section": spec.name, "id": e.get("id"), "text": e.get("text")} for e in shown_entries(state, spec)
            ]
        elif text_of(state, spec):
            found.append({"section": spec.name, "text": text_of(state, spec)})
    return found


# What a cycle's record carries of the surfaced entries at most (all of them are counted).
SURFACED_IN_RECORD, SURFACED_CHARS = 20, 300


def surfaced_summary(state: dict, specs: Iterable[SectionSpec]) -> dict:
    """What a cycle's record (the index, the hook's stdin, the metrics) says of `surfaced`: how many,
    and the first SURFACED_IN_RECORD, each text clipped to SURFACED_CHARS."""
    found = surfaced(state, specs)
    shown = [
        {
            **item,
            "text": item["text"] if len(item["text"]) <= SURFACED_CHARS else item["text"][: SURFACED_CHARS - 1] + "…",
        }
        for item in found[:SURFACED_IN_RECORD]
    ]
    return {"count": len(found), "entries": shown}
