"""Settling sections at wake, before the `_before` snapshot: every section's key made, hand-written
entries adopted as the operator's, id counters raised past every id the state and the archive
hold, a section over a lowered limit brought within it (what leaves, archived at sleep); and
`over_limits`, what `agent doctor` warns of. Entries and ids: agent/memory/sections.py.
"""

from __future__ import annotations

import copy
import datetime as _dt
from typing import Iterable, Mapping

from agent.memory.builtin import Change, Stamp, oldest_lines_over
from agent.memory.sections import (
    OPERATOR,
    RUNTIME_ENTRY_KEYS,
    entries_of,
    fill,
    new_entry,
    raised_ids,
    shown_entries,
    text_of,
    weakest_first,
    without,
)
from agent.setting_checks import SectionSpec
from agent.state import SECTION_IDS_KEY
from agent.store.archive import Left


def settle(state: dict, specs: Iterable[SectionSpec], stamp: Stamp, floor: Mapping[str, int] | None = None) -> Change:
    """At wake, before the `_before` snapshot (the state has passed `kind_conflict` and
    `state_problems`): every section's key made; a plain string or an id-less mapping in a list
    adopted as the operator's entry; each counter at least its section's highest id, and at least
    `floor` (the highest id of each section the archive holds: an id is never issued twice, even
    when an operator lowers or deletes `section_ids`); and a section
    over a lowered limit brought within it: a list's weakest model entries archived (the operator's
    stay, over the limit if need be: `over_limits` says so), a writable text's oldest lines archived
    when it says when_full: archive. No sections: the state as given, untouched."""
    specs = tuple(specs)
    if not specs:
        return Change(state)
    new, leaving, notes = copy.deepcopy(state), [], []
    _raise_counters(new, specs, floor or {})
    for spec in specs:
        if spec.is_list:
            _settle_list(new, spec, stamp, leaving, notes)
        else:
            _settle_text(new, spec, leaving, notes)
    return Change(new, tuple(leaving), tuple(notes))


def _raise_counters(state: dict, specs: tuple[SectionSpec, ...], floor: Mapping[str, int]) -> None:
    """Each list section's counter at least the highest id of its form in any list section (an entry
    moved by hand to another section keeps its id, and that id must never be issued again), and at
    least its `floor`."""
    lists = {spec.name: spec for spec in specs if spec.is_list}
    ids = [item.get("id") for spec in lists.values() for item in entries_of(state, spec) if isinstance(item, dict)]
    for name, number in raised_ids(dict(floor), ids).items():
        if name in lists and number > state.get(SECTION_IDS_KEY, {}).get(name, 0):
            state.setdefault(SECTION_IDS_KEY, {})[name] = number


def _settle_list(state: dict, spec: SectionSpec, stamp: Stamp, leaving: list, notes: list) -> None:
    name = spec.name
    items = state.get(name)
    if items is None:
        items = []
    elif not isinstance(items, list):
        return  # a kind changed: kind_conflict refuses such a state before wake gets here
    entries, adopted = [], []
    for item in items:
        if isinstance(item, dict) and "id" in item:
            if isinstance(item.get("last_day"), _dt.date):
                item["last_day"] = item["last_day"].isoformat()
            entries.append(item)
            continue
        text, extra = (item, {}) if isinstance(item, str) else (item["text"], item)
        entry = {**new_entry(state, spec, text.strip(), OPERATOR, stamp)}
        entry.update({k: v for k, v in extra.items() if k not in RUNTIME_ENTRY_KEYS and k != "text"})
        entries.append(entry)
        adopted.append(entry["id"])
    if adopted:
        notes.append(f"{name}: adopted {', '.join(adopted)} as the operator's")
    over = len(entries) - spec.limit
    victims = weakest_first(entries)[: max(over, 0)]
    if victims:
        entries = without(entries, victims)
        leaving.extend(Left.from_section(name, v, "limit") for v in victims)
        notes.append(f"{name}: its limit is {spec.limit}: archived {', '.join(v['id'] for v in victims)}, the weakest")
    state[name] = entries


def _settle_text(state: dict, spec: SectionSpec, leaving: list, notes: list) -> None:
    name, text = spec.name, text_of(state, spec)
    state[name] = text
    if len(text) <= spec.limit or spec.read_only or spec.when_full == "refuse":
        return
    lines = text.split("\n")
    cut = oldest_lines_over(lines, spec.limit)
    leaving.append(Left.from_section(name, "\n".join(lines[:cut]), "limit"))
    state[name] = "\n".join(lines[cut:])
    notes.append(f"{name}: its limit is {spec.limit} characters: archived its {cut} oldest line(s)")


def over_limits(state: dict, specs: Iterable[SectionSpec]) -> list[str]:
    """Sections over their limit after wake (the operator's entries, a read-only or refuse-when-full
    text): what `agent doctor` warns about."""
    found = []
    for spec in specs:
        if spec.is_list and len(entries_of(state, spec)) > spec.limit:
            found.append(
                f"section '{spec.name}' holds {fill(state, spec)} entries, over its limit: the rest are the "
                f"operator's, never evicted (agent memory drop {spec.name} ID, or raise its limit)"
            )
        elif not spec.is_list and len(text_of(state, spec)) > spec.limit:
            found.append(
                f"section '{spec.name}' holds {fill(state, spec)}, over its limit (agent memory set, or raise it)"
            )
        if spec.is_list:
            found += [
                f"entry {e.get('id', '(not yet adopted)')} of '{spec.name}' is {len(e['text'])} characters, over its "
                f"entry_chars ({spec.entry_chars})"
                for e in shown_entries(state, spec)
                if isinstance(e.get("text"), str) and len(e["text"]) > spec.entry_chars
            ]
    return found
