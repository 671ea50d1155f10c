"""Edits of sections: the model's (update_scratchpad, and reflect: agent/memory/reflect.py) and the
operator's (`agent memory add|drop|set`), each all applied or refused with a message, and the
per-cycle bound on what may leave a list section (`loss_problems`). The grammar, exact and
case-sensitive: "APPEND: text" adds (a list: an entry, the same text again restates it; a text: a
line), "REMOVE: id" takes a list's entry out, "CLEAR" empties a text, any other value replaces a
text. Entries and ids: agent/memory/sections.py.

- `apply_edits`           the model's values for sections, judged by the state the cycle began from
                          (`Edits`, agent/memory/specs.py, applies them in a cycle)
- `operator_edit`         as the operator: read-only sections included, the per-cycle bound not applied
- `loss_problems`         the per-cycle bound, checked again on the state a cycle would save
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Iterable

from agent.common.plain import described
from agent.common.reading import reads_empty
from agent.memory.builtin import Change, Stamp, oldest_lines_over
from agent.memory.sections import (
    APPEND,
    CLEAR,
    MODEL,
    OPERATOR,
    REMOVE,
    entries_of,
    fill,
    new_entry,
    removal_allowance,
    said,
    shown_id,
    specs_by_name,
    text_of,
    weakest_first,
    without,
)
from agent.setting_checks import SectionSpec
from agent.store.archive import Left


class _Refused(Exception):
    """One edit cannot be applied: the whole change is refused with this message."""


def _restated(entry: dict, stamp: Stamp) -> bool:
    """Count a statement of `entry` on `stamp`'s day: a new day adds one (a clock gone back adds none)."""
    if str(entry.get("last_day")) >= stamp.day:
        return False
    entry["days"] = entry.get("days", 1) + 1
    entry["last_day"] = stamp.day
    return True


def _one_line(text: str) -> bool:
    return len(text.splitlines()) <= 1


def _too_long(holds: str, limit: int, this: str, text: str) -> _Refused:
    return _Refused(f"{holds} at most {limit} characters; this {this} is {len(text)} (nothing was cut: shorten it)")


# ------------------------------------------------------------------------- the model's edits


def apply_edits(
    state: dict,
    specs: Iterable[SectionSpec],
    edits: dict,
    *,
    start: dict,
    max_loss: float,
    stamp: Stamp,
) -> Change:
    """The model's values for sections (update_scratchpad, or the reflect step): all applied, or
    none (the first refusal names its section). `start`: the state the cycle began from (after
    wake), which bounds what may leave each list section in this cycle (`removal_allowance`)."""
    names = specs_by_name(specs)
    if not edits:
        return Change(state)
    new, leaving, notes = copy.deepcopy(state), [], []
    try:
        for name, value in edits.items():
            spec = names.get(name)
            if spec is None:
                raise _Refused(f"'{name}' is not a section (sections: {', '.join(names) or 'none'})")
            if spec.read_only:
                raise _Refused(f"section '{name}' is read-only: only the operator writes it (agent memory set)")
            if not isinstance(value, str):
                raise _Refused(f"section '{name}' takes a string, got {described(value)}")
            edit = _list_edit if spec.is_list else _text_edit
            edit(new, spec, value, _Context(leaving, notes, stamp, start, max_loss, MODEL))
    except _Refused as exc:
        return Change(state, refusal=str(exc))
    return Change(new, tuple(leaving), tuple(notes))


@dataclass
class _Context:
    """What one edit may add to (the leaving and the notes) and what it is judged by."""

    leaving: list[Left]
    notes: list[str]
    stamp: Stamp
    start: dict | None  # None: the operator's edit, no per-cycle bound
    max_loss: float
    by: str


def _text_edit(state: dict, spec: SectionSpec, value: str, ctx: _Context) -> None:
    """APPEND: a line; CLEAR; any other value replaces the text (REMOVE: is refused: it is a list's)."""
    name = spec.name
    if value.startswith(APPEND):
        _append_line(state, spec, value[len(APPEND) :].strip(), ctx, f"nothing to append after '{APPEND}'")
        return
    if value.startswith(REMOVE):
        raise _Refused(f"section '{name}' is text: '{REMOVE} <id>' is for list sections (send CLEAR, or its new text)")
    _replace_text(state, spec, "" if value.strip() == CLEAR else value.strip(), ctx)


def _replace_text(state: dict, spec: SectionSpec, new: str, ctx: _Context) -> None:
    """The text replaced by `new` ('' empties it), the old one archived; refused when too long."""
    name, old = spec.name, text_of(state, spec)
    if new and reads_empty(new):
        raise _Refused(f"section '{name}': the new text shows nothing readable (send CLEAR to empty it)")
    if len(new) > spec.limit:
        raise _too_long(f"section '{name}' holds", spec.limit, "text", new)
    if old and old != new:
        ctx.leaving.append(Left.from_section(name, old, "clear" if not new else "replace"))
    state[name] = new
    ctx.notes.append(f"{name}: cleared" if not new else f"{name}: replaced ({fill(state, spec)})")


def _append_line(state: dict, spec: SectionSpec, line: str, ctx: _Context, empty: str) -> None:
    """The text with `line` added (refused with `empty` when it reads as nothing); when it no longer
    fits, its oldest lines go to the archive (when_full: archive) or the append is refused
    (when_full: refuse, or a line too long on its own)."""
    if reads_empty(line):
        raise _Refused(f"section '{spec.name}': {empty}")
    state[spec.name] = _appended_text(state, spec, line, ctx)
    ctx.notes.append(f"{spec.name}: appended a line ({fill(state, spec)})")


def _appended_text(state: dict, spec: SectionSpec, line: str, ctx: _Context) -> str:
    old = text_of(state, spec)
    new = f"{old}\n{line}" if old else line
    if len(new) <= spec.limit:
        return new
    if len(line) > spec.limit:
        raise _too_long(f"section '{spec.name}' holds", spec.limit, "line", line)
    if spec.when_full == "refuse":
        raise _Refused(
            f"section '{spec.name}' is full ({fill(state, spec)}; adding this line would make {len(new)}): "
            f"replace or CLEAR it first"
        )
    lines = new.split("\n")
    cut = oldest_lines_over(lines, spec.limit)
    ctx.leaving.append(Left.from_section(spec.name, "\n".join(lines[:cut]), "trim"))
    return "\n".join(lines[cut:])


def _list_edit(state: dict, spec: SectionSpec, value: str, ctx: _Context) -> None:
    name = spec.name
    if value.startswith(APPEND):
        _append_entry(state, spec, value[len(APPEND) :].strip(), ctx)
    elif value.startswith(REMOVE):
        _remove_entry(state, spec, value[len(REMOVE) :].strip(), ctx)
    elif value.strip() == CLEAR:
        raise _Refused(
            f"section '{name}' is a list: CLEAR of a list is consolidation's alone; '{REMOVE} <id>' removes one entry"
        )
    else:
        raise _Refused(
            f"section '{name}' is a list: send '{APPEND} <text>' to add an entry or '{REMOVE} <id>' to remove one "
            f"(replacing the whole list is consolidation's alone)"
        )


def _append_entry(state: dict, spec: SectionSpec, text: str, ctx: _Context) -> None:
    name, entries = spec.name, list(entries_of(state, spec))
    _check_entry_text(spec, text)
    for entry in entries:
        if said(entry["text"]) == said(text):
            counted = _restated(entry, ctx.stamp)
            promoted = ctx.by == OPERATOR and entry.get("by") != OPERATOR
            if promoted:
                entry["by"] = OPERATOR
            state[name] = entries
            told = f"now {entry['days']} days" if counted else "already counted today"
            ctx.notes.append(f"{name}: restated {entry['id']} ({told}{', now the operator' if promoted else ''})")
            return
    entries = _room_for_one(state, spec, entries, ctx)
    entry = new_entry(state, spec, text, ctx.by, ctx.stamp)
    state[name] = [*entries, entry]
    ctx.notes.append(f"{name}: added {entry['id']} ({fill(state, spec)})")


def _check_entry_text(spec: SectionSpec, text: str) -> None:
    if reads_empty(text):
        raise _Refused(f"section '{spec.name}': nothing to add after '{APPEND}'")
    if not _one_line(text):
        raise _Refused(f"section '{spec.name}': an entry is one line; send each line as its own APPEND")
    if len(text) > spec.entry_chars:
        raise _too_long(f"section '{spec.name}': an entry holds", spec.entry_chars, "one", text)


def _room_for_one(state: dict, spec: SectionSpec, entries: list[dict], ctx: _Context) -> list[dict]:
    """`entries` with room for one more: unchanged when there is room; else the weakest model entries
    archived (when_full: archive, and within the cycle's bound), or _Refused."""
    over = len(entries) + 1 - spec.limit
    if over <= 0:
        return entries
    name = spec.name
    if spec.when_full == "refuse":
        raise _Refused(f"section '{name}' is full ({fill(state, spec)}): remove an entry with '{REMOVE} <id>' first")
    victims = weakest_first(entries)[:over]
    if len(victims) < over:
        raise _Refused(
            f"section '{name}' is full ({fill(state, spec)}) and only the operator's entries are left; "
            f"the operator's entries are never evicted"
        )
    _check_bound(state, spec, victims, ctx, "make room")
    for victim in victims:
        ctx.leaving.append(Left.from_section(name, victim, "evict"))
    ctx.notes.append(f"{name}: archived {', '.join(v['id'] for v in victims)} to make room (when_full: archive)")
    return without(entries, victims)


def _check_bound(state: dict, spec: SectionSpec, leaving: list[dict], ctx: _Context, why: str) -> None:
    """Refuse letting `leaving` go when that would spend more than the cycle's share of the entries
    the section began the cycle with (entries added in this cycle cost nothing)."""
    if ctx.start is None:
        return
    started, gone, allowed = _spent(ctx.start, state, spec, ctx.max_loss)
    costs = sum(1 for e in leaving if e.get("id") in started)
    if costs and len(gone) + costs > allowed:
        raise _Refused(
            f"section '{spec.name}': cannot {why}: {len(gone)} of the {len(started)} entries it began this cycle with "
            f"have left already, and at most {allowed} may leave in one cycle (consolidate_max_loss {ctx.max_loss})"
        )


def _remove_entry(state: dict, spec: SectionSpec, entry_id: str, ctx: _Context) -> None:
    name, entries = spec.name, entries_of(state, spec)
    found = next((e for e in entries if e.get("id") == entry_id), None)
    if found is None:
        ids = ", ".join(str(e.get("id")) for e in entries[:20]) + (", ..." if len(entries) > 20 else "")
        shown = f"'{entry_id}'" if shown_id(entry_id) == entry_id else shown_id(entry_id)
        raise _Refused(f"section '{name}' has no entry {shown} (its ids: {ids or 'none, it is empty'})")
    if found.get("by") == OPERATOR and ctx.by != OPERATOR:
        raise _Refused(f"entry {entry_id} of '{name}' is the operator's: only `agent memory drop` removes it")
    _check_bound(state, spec, [found], ctx, f"remove {entry_id}")
    state[name] = [e for e in entries if e is not found]
    ctx.leaving.append(Left.from_section(name, found, "remove" if ctx.by == MODEL else "drop"))
    ctx.notes.append(f"{name}: removed {entry_id} ({fill(state, spec)})")


# ---------------------------------------------------------------------- the operator's edits


def operator_edit(state: dict, spec: SectionSpec | None, op: str, value: str, stamp: Stamp) -> Change:
    """`agent memory add SECTION TEXT` (an entry, or a line of a text section), `drop SECTION ID`
    (a list entry) or `set SECTION TEXT` (a text section's whole text, as given; '' empties it), written as
    the operator: read-only sections too, the per-cycle bound not applied; limits hold (a full list
    makes room from the model's entries, like when_full: archive, unless it says refuse)."""
    if spec is None:
        return Change(state, refusal="no such section in config.yaml")
    ctx = _Context([], [], stamp, None, 1.0, OPERATOR)
    new = copy.deepcopy(state)
    try:
        if op == "add" and spec.is_list:
            _append_entry(new, spec, value.strip(), ctx)
        elif op == "add":
            _append_line(new, spec, value.strip(), ctx, "the text is empty")
        elif op == "drop" and spec.is_list:
            _remove_entry(new, spec, value.strip(), ctx)
        elif op == "set" and not spec.is_list:
            _replace_text(new, spec, value.strip(), ctx)  # as given: a prefix is no command here
        else:
            kind = "a list: use add and drop" if spec.is_list else "text: use add and set"
            raise _Refused(f"section '{spec.name}' is {kind}")
    except _Refused as exc:
        return Change(state, refusal=str(exc))
    leaving = tuple(
        dataclasses.replace(item, reason="set") if item.reason in ("replace", "clear") else item for item in ctx.leaving
    )
    return Change(new, leaving, tuple(ctx.notes))


def _spent(start: dict, state: dict, spec: SectionSpec, max_loss: float) -> tuple[set, set, int]:
    """The per-cycle bound of list section `spec`: (the ids it began the cycle with in `start`, those
    of them `state` no longer holds, how many may leave in the cycle: `removal_allowance`)."""
    started = {e.get("id") for e in entries_of(start, spec)}
    return started, started - {e.get("id") for e in entries_of(state, spec)}, removal_allowance(len(started), max_loss)


def loss_problems(before: dict, after: dict, specs: Iterable[SectionSpec], max_loss: float) -> list[str]:
    """The per-cycle bound, checked on the state a cycle would save: of the entries a list section
    began the cycle with, at most `removal_allowance` are gone."""
    found = []
    for spec in specs:
        if not spec.is_list:
            continue
        started, gone, allowed = _spent(before, after, spec, max_loss)
        if len(gone) > allowed:
            found.append(
                f"section '{spec.name}' lost {len(gone)} of the {len(started)} entries it began the cycle with; "
                f"at most {allowed} may leave in one cycle"
            )
    return found
