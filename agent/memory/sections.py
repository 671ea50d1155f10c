"""Sections: the operator's own parts of the scratchpad (`sections` in config.yaml, checked into
`SectionSpec`s by agent/setting_checks.py), and every rule of how they change.

A section is a top-level key of active.yaml beside msa's six fields. A `text` section holds a
string of at most `limit` characters. A `list` section holds entries, each a mapping:

    - id: known-12          runtime-owned: `<section>-<n>`, n from the counter under `section_ids`,
      text: The backup ...     never reused (an archived id stays taken)
      by: model             runtime-owned: model | operator
      added: '20260116_101500_01'   runtime-owned: the cycle (or operator command) that added it
      days: 3               runtime-owned: on how many distinct UTC days it was stated
      last_day: '2026-01-18'        runtime-owned: the last of them
      merged_from: [known-3, known-7]   runtime-owned, on a successor made by consolidation
      stands_for: 3         runtime-owned, on a successor: the original entries its lineage merged

The model never writes a runtime-owned field: it sends strings (`"APPEND: text"`, `"REMOVE: id"`,
`"CLEAR"`, a new text) and the runtime builds the entries. Nothing leaves a section except into
the archive: each function returns what left (`Left`, agent/store/archive.py: the archive's one record type) beside the new state, and the caller
appends it to the archive before it saves the state. Nothing is cut: a value that does not fit is
refused with a message the model reads.

Pure functions, state in and a `Change` out, never raising for what the model sent. With no
sections (a home whose config.yaml has none) every function is a no-op that returns the state it
was given, so such a home behaves byte for byte as before.

- `settle`            at wake: section keys made, hand-written entries adopted, lowered limits applied
- `apply_edits`       the model's update_scratchpad values for sections (also the reflect step's)
- `operator_edit`     `agent memory add|drop|set`, as the operator (read-only sections included)
- `loss_problems`     the per-cycle bound on what may leave a list section, checked before saving
- `render`, `fill`    the prompt's block and the fill gauge; `surfaced`: what a person should know
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as _dt
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Iterable, Mapping

from agent.common.cycle_ids import SECOND_FORMAT, cycle_started
from agent.common.escape import escape_controls
from agent.common.outcomes import InvalidScratchpad, UsageError
from agent.common.plain import described
from agent.common.reading import as_read, reads_empty
from agent.setting_checks import SectionSpec, by_stability
from agent.state import SECTION_IDS_KEY
from agent.store.archive import Left

APPEND, REMOVE, CLEAR = "APPEND:", "REMOVE:", "CLEAR"
MODEL, OPERATOR = "model", "operator"
# The fields of an entry only the runtime writes (and the order a new entry's keys are written in).
ENTRY_KEYS = ("id", "text", "by", "added", "days", "last_day")
RUNTIME_ENTRY_KEYS = frozenset({"id", "by", "added", "days", "last_day", "merged_from", "protected", "stands_for"})
# The days on which an entry must have been stated to be protected (never archived bare by a consolidation).
PROTECTED_DAYS = 2
DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


# --------------------------------------------------------------------------------- data types


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


class _Refused(Exception):
    """One edit cannot be applied: the whole change is refused with this message."""


# ------------------------------------------------------------------------------------ helpers


def specs_by_name(specs: Iterable[SectionSpec]) -> dict[str, SectionSpec]:
    return {spec.name: spec for spec in specs}


def entries_of(state: dict, spec: SectionSpec) -> list:
    value = state.get(spec.name)
    return value if isinstance(value, list) else []


def shown_entries(state: dict, spec: SectionSpec) -> list[dict]:
    """A list section's entries as a reader shows them, before wake has adopted what an operator wrote
    by hand too: a plain string is an entry with that text and no id yet (the operator's)."""
    return [
        {"text": item, "by": OPERATOR} if isinstance(item, str) else item
        for item in entries_of(state, spec)
        if isinstance(item, (str, dict))
    ]


def text_of(state: dict, spec: SectionSpec) -> str:
    value = state.get(spec.name)
    return value if isinstance(value, str) else ""


def said(text: str) -> str:
    """What a statement says, as a person reads it (agent/common/reading.py: invisible code points,
    NFKC and white space aside), case aside: equal for two that say the same."""
    return as_read(text).casefold()


def same_text(a: str, b: str) -> bool:
    """Whether two statements say the same, as read and case aside."""
    return said(a) == said(b)


# The most digits an id's number is read with: ids the runtime makes never get near it, and int()
# refuses strings past 4,300 digits.
ID_DIGITS = 18
ID_NUMBER = re.compile(f"[0-9]{{1,{ID_DIGITS}}}")


def id_number(entry_id: Any) -> int:
    """The counter part of an id `<section>-<n>` (0 for an id of another form: a hand-written
    "known-²" or "known-٣" is not a number the runtime wrote, nor are 5,000 digits)."""
    number = str(entry_id).rpartition("-")[2]
    return int(number) if ID_NUMBER.fullmatch(number) else 0


def shown_id(value: Any) -> str:
    """A name or id the model sent, as a message shows it: as is when it could be one of ours (short,
    plain), else described (clipped, its type named): a 10,000-character id never fills a message."""
    if isinstance(value, str) and len(value) <= 64 and value.isprintable() and " " not in value:
        return value
    return described(value)


def most_lost(count: int, max_loss: float) -> int:
    """How many of `count` entries may leave at a fraction `max_loss`: floor(max_loss x count),
    computed exactly (0.29 x 100 is 29, not 28.999...)."""
    return int(Fraction(str(max_loss)) * count)


def removal_allowance(count: int, max_loss: float) -> int:
    """How many of the `count` entries a list section held when a cycle began may leave it in that
    cycle: `consolidate_max_loss` of them, and always at least one."""
    return max(1, most_lost(count, max_loss))


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def lineage(entry: dict) -> int:
    """How many original entries `entry` stands for: 1, or a successor's `stands_for` (one made
    before that field was kept: at least its sources)."""
    if _count(entry.get("stands_for")):
        return entry["stands_for"]
    merged = entry.get("merged_from")
    return max(len(merged), 1) if isinstance(merged, list) else 1


def protected(entry: dict) -> bool:
    """Whether a consolidation may never archive `entry` bare: the operator's, stated on
    PROTECTED_DAYS days or more, or a successor of such an entry (`protected: true`: protection
    passes to a successor, so two consolidations cannot launder it: merged with a weaker entry, then
    archived bare)."""
    return entry.get("by") == OPERATOR or entry.get("days", 1) >= PROTECTED_DAYS or entry.get("protected") is True


def strength(entry: dict) -> int:
    """An entry's days as eviction weighs them: a protected successor weighs as PROTECTED_DAYS."""
    days = entry.get("days", 1)
    return max(days, PROTECTED_DAYS) if entry.get("protected") is True else days


def weakest_first(entries: list[dict]) -> list[dict]:
    """Model entries in the order eviction takes them: the fewest days first (`strength`), then the
    longest since last stated, then the oldest. Operator entries are never evicted."""
    model = [e for e in entries if e.get("by") == MODEL]
    return sorted(
        model, key=lambda e: (strength(e), str(e.get("last_day")), str(e.get("added")), id_number(e.get("id")))
    )


def next_id(state: dict, name: str) -> str:
    """The next id of section `name` (its counter under SECTION_IDS_KEY, advanced in `state`)."""
    counters = state.setdefault(SECTION_IDS_KEY, {})
    number = counters.get(name, 0) + 1
    counters[name] = number
    return f"{name}-{number}"


def _new_entry(state: dict, spec: SectionSpec, text: str, by: str, stamp: Stamp) -> dict:
    return {
        "id": next_id(state, spec.name),
        "text": text,
        "by": by,
        "added": stamp.cycle,
        "days": 1,
        "last_day": stamp.day,
    }


def _restated(entry: dict, stamp: Stamp) -> bool:
    """Count a statement of `entry` on `stamp`'s day: a new day adds one (a clock gone back adds none)."""
    if str(entry.get("last_day")) >= stamp.day:
        return False
    entry["days"] = entry.get("days", 1) + 1
    entry["last_day"] = stamp.day
    return True


def fill(state: dict, spec: SectionSpec) -> str:
    """The fill gauge: `12/30` (entries) or `410/600 characters`."""
    if spec.is_list:
        return f"{len(entries_of(state, spec))}/{spec.limit}"
    return f"{len(text_of(state, spec))}/{spec.limit} characters"


def _one_line(text: str) -> bool:
    return len(text.splitlines()) <= 1


# ------------------------------------------------------------------------- the model's edits


def split_update(args: dict, specs: Iterable[SectionSpec]) -> tuple[dict, dict]:
    """update_scratchpad's arguments as (the fields', the sections') (read-only sections included,
    so they are refused by name)."""
    names = specs_by_name(specs)
    return {k: v for k, v in args.items() if k not in names}, {k: v for k, v in args.items() if k in names}


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


@dataclass(frozen=True)
class Edits:
    """A cycle's sections as update_scratchpad and the reflect step apply them: the specs, the state
    the cycle began from (after wake: it bounds what may leave each list in the cycle), the cycle's
    stamp and the share that may leave (`consolidate_max_loss`)."""

    specs: tuple[SectionSpec, ...]
    start: dict
    stamp: Stamp
    max_loss: float

    def split(self, args: dict) -> tuple[dict, dict]:
        """update_scratchpad's arguments as (the fields', the sections')."""
        return split_update(args, self.specs)

    def apply(self, state: dict, edits: dict) -> Change:
        return apply_edits(state, self.specs, edits, start=self.start, max_loss=self.max_loss, stamp=self.stamp)

    def problems(self, after: dict) -> list[str]:
        """Why the state a cycle would save breaks the sections' rules (checked again before saving:
        every edit was checked as it was applied, this holds whatever happened in between)."""
        return state_problems(after, self.specs) + loss_problems(self.start, after, self.specs, self.max_loss)


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
    name, old = spec.name, text_of(state, spec)
    if value.startswith(APPEND):
        line = value[len(APPEND) :].strip()
        if reads_empty(line):
            raise _Refused(f"section '{name}': nothing to append after '{APPEND}'")
        state[name] = _appended_text(state, spec, old, line, ctx)
        ctx.notes.append(f"{name}: appended a line ({fill(state, spec)})")
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
        raise _Refused(
            f"section '{name}' holds at most {spec.limit} characters; this text is {len(new)} "
            f"(nothing was cut: shorten it)"
        )
    if old and old != new:
        ctx.leaving.append(Left.from_section(name, old, "clear" if not new else "replace"))
    state[name] = new
    ctx.notes.append(f"{name}: cleared" if not new else f"{name}: replaced ({fill(state, spec)})")


def _appended_text(state: dict, spec: SectionSpec, old: str, line: str, ctx: _Context) -> str:
    """The text with `line` added; when it no longer fits, its oldest lines go to the archive
    (when_full: archive) or the append is refused (when_full: refuse, or a line too long on its own)."""
    new = f"{old}\n{line}" if old else line
    if len(new) <= spec.limit:
        return new
    if len(line) > spec.limit:
        raise _Refused(
            f"section '{spec.name}' holds at most {spec.limit} characters; this line is {len(line)} "
            f"(nothing was cut: shorten it)"
        )
    if spec.when_full == "refuse":
        raise _Refused(
            f"section '{spec.name}' is full ({fill(state, spec)}; adding this line would make {len(new)}): "
            f"replace or CLEAR it first"
        )
    lines = new.split("\n")
    cut = _oldest_lines_over(lines, spec.limit)
    ctx.leaving.append(Left.from_section(spec.name, "\n".join(lines[:cut]), "trim"))
    return "\n".join(lines[cut:])


def _oldest_lines_over(lines: list[str], limit: int) -> int:
    """How many of the first `lines` must go for the rest, joined by newlines, to fit `limit`
    characters (one pass from the newest line back)."""
    size = -1
    for index in range(len(lines) - 1, -1, -1):
        size += len(lines[index]) + 1
        if size > limit:
            return index + 1
    return 0


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
        if same_text(entry["text"], text):
            counted = _restated(entry, ctx.stamp)
            promoted = ctx.by == OPERATOR and entry.get("by") != OPERATOR
            if promoted:
                entry["by"] = OPERATOR
            state[name] = entries
            told = f"now {entry['days']} days" if counted else "already counted today"
            ctx.notes.append(f"{name}: restated {entry['id']} ({told}{', now the operator' if promoted else ''})")
            return
    entries = _room_for_one(state, spec, entries, ctx)
    entry = _new_entry(state, spec, text, ctx.by, ctx.stamp)
    state[name] = [*entries, entry]
    ctx.notes.append(f"{name}: added {entry['id']} ({fill(state, spec)})")


def _check_entry_text(spec: SectionSpec, text: str) -> None:
    if reads_empty(text):
        raise _Refused(f"section '{spec.name}': nothing to add after '{APPEND}'")
    if not _one_line(text):
        raise _Refused(f"section '{spec.name}': an entry is one line; send each line as its own APPEND")
    if len(text) > spec.entry_chars:
        raise _Refused(
            f"section '{spec.name}': an entry holds at most {spec.entry_chars} characters; this one is {len(text)} "
            f"(nothing was cut: shorten it)"
        )


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
    gone = {id(v) for v in victims}
    for victim in victims:
        ctx.leaving.append(Left.from_section(name, victim, "evict"))
    ctx.notes.append(f"{name}: archived {', '.join(v['id'] for v in victims)} to make room (when_full: archive)")
    return [e for e in entries if id(e) not in gone]


def _check_bound(state: dict, spec: SectionSpec, leaving: list[dict], ctx: _Context, why: str) -> None:
    """Refuse letting `leaving` go when that would spend more than the cycle's share of the entries
    the section began the cycle with (entries added in this cycle cost nothing)."""
    if ctx.start is None:
        return
    started = {e.get("id") for e in entries_of(ctx.start, spec)}
    costs = sum(1 for e in leaving if e.get("id") in started)
    if not costs:
        return
    gone = len(started - {e.get("id") for e in entries_of(state, spec)})
    allowed = removal_allowance(len(started), ctx.max_loss)
    if gone + costs > allowed:
        raise _Refused(
            f"section '{spec.name}': cannot {why}: {gone} of the {len(started)} entries it began this cycle with "
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

OPERATOR_OPS = ("add", "drop", "set")


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
        if op == "add":
            (_append_entry if spec.is_list else _operator_line)(new, spec, value.strip(), ctx)
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


def _operator_line(state: dict, spec: SectionSpec, line: str, ctx: _Context) -> None:
    if reads_empty(line):
        raise _Refused(f"section '{spec.name}': the text is empty")
    state[spec.name] = _appended_text(state, spec, text_of(state, spec), line, ctx)
    ctx.notes.append(f"{spec.name}: appended a line ({fill(state, spec)})")


# --------------------------------------------------------------------------- the state's rules


def kind_conflict(state: dict, specs: Iterable[SectionSpec]) -> str | None:
    """Why active.yaml cannot be used with these sections because a section's key holds something
    else (text where config.yaml says list, a list where it says text: the kind changed; or an
    operator's key of that name holding a mapping or a number): a usage error, exit 2. None: it can."""
    for spec in specs:
        value = state.get(spec.name)
        if value is None or isinstance(value, list if spec.is_list else str):
            continue
        kind = "a list" if spec.is_list else "text"
        if isinstance(value, (str, list)):
            held = "text" if isinstance(value, str) else "a list"
            return (
                f"section '{spec.name}' is {kind} in config.yaml, but active.yaml holds {held} under "
                f"'{spec.name}': its kind changed; restore the kind, or rename the key in active.yaml "
                f"(it is then kept as an operator key) and start the section anew"
            )
        return (
            f"section '{spec.name}' is {kind} in config.yaml, but active.yaml already uses '{spec.name}' for "
            f"{_kind_of(value)}; rename that key in active.yaml, or name the section otherwise"
        )
    return None


def _kind_of(value: Any) -> str:
    """What a YAML value is, in words (never a Python repr)."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, bool):
        return "true or false"
    return "a number" if isinstance(value, (int, float)) else "a value of another kind"


def checked(state: dict, specs: Iterable[SectionSpec], where: object) -> None:
    """Refuse a state these sections cannot be used with, before anything is written: a kind that
    changed or a key used for something else is UsageError (exit 2), a hand-broken section
    InvalidScratchpad (exit 6); `where` (active.yaml's path) starts the message."""
    specs = tuple(specs)
    conflict = kind_conflict(state, specs)
    if conflict:
        raise UsageError(f"{where}: {conflict}")
    found = state_problems(state, specs)
    if found:
        raise InvalidScratchpad(
            f"{where}: {'; '.join(found[:5])}" + (f" (and {len(found) - 5} more)" if len(found) > 5 else "")
        )


def state_problems(state: dict, specs: Iterable[SectionSpec]) -> list[str]:
    """Every reason the sections in `state` are not valid (an invalid scratchpad, exit 6), kind
    changes aside (`kind_conflict`). A list item that is a plain string, or a mapping with a text
    and no id, is valid: `settle` adopts it as the operator's entry. No sections: no problem (a
    home without sections keeps every key as it is, `section_ids` too)."""
    specs = tuple(specs)
    if not specs:
        return []
    found, seen = [], {}
    for spec in specs:
        value = state.get(spec.name)
        if value is None or isinstance(value, (str, list)) and not spec.is_list or isinstance(value, str):
            continue  # empty, text, or a kind changed (kind_conflict's to say)
        if not isinstance(value, list):
            found.append(
                f"section '{spec.name}' must be {'a list' if spec.is_list else 'text'}, got {described(value)}"
            )
            continue
        for index, item in enumerate(value):
            where = f"{spec.name}[{index}]"
            problem = _item_problem(item, where)
            if problem:
                found.append(problem)
            elif isinstance(item, dict) and "id" in item:
                if item["id"] in seen:
                    found.append(f"{where}: id {item['id']} is also {seen[item['id']]}")
                seen[item["id"]] = where
    counters = state.get(SECTION_IDS_KEY)
    if SECTION_IDS_KEY in state and not (
        isinstance(counters, dict)
        and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counters.values())
    ):
        found.append(f"'{SECTION_IDS_KEY}' must map section names to whole numbers, got {described(counters)}")
    return found


def _item_problem(item: Any, where: str) -> str | None:
    if isinstance(item, str):
        return None if item.strip() else f"{where} is empty"
    if not isinstance(item, dict):
        return f"{where} must be an entry (a mapping with a text) or a plain string, got {described(item)}"
    if not isinstance(item.get("text"), str) or not item["text"].strip():
        return f"{where} has no text"
    if "id" not in item:
        return None
    checks = {
        "id": isinstance(item.get("id"), str),
        "by": item.get("by") in (MODEL, OPERATOR),
        "added": isinstance(item.get("added"), str),
        "days": isinstance(item.get("days"), int) and not isinstance(item.get("days"), bool) and item["days"] >= 1,
        "last_day": isinstance(item.get("last_day"), (str, _dt.date)) and bool(DAY.fullmatch(str(item["last_day"]))),
        "merged_from": isinstance(item.get("merged_from", []), list),
        "protected": isinstance(item.get("protected", False), bool),
        "stands_for": _count(item.get("stands_for", 1)),
    }
    wrong = [key for key, ok in checks.items() if not ok]
    if wrong:
        return f"{where} ({item.get('id')}): runtime field '{wrong[0]}' is missing or wrong, got {described(item.get(wrong[0]))}"
    return None


# ------------------------------------------------------------------------------------- wake


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
    names = {spec.name for spec in specs if spec.is_list}
    highest: dict[str, int] = {name: number for name, number in floor.items() if name in names and number > 0}
    for spec in specs:
        items = state.get(spec.name) if spec.is_list else None
        for item in items if isinstance(items, list) else ():
            prefix = str(item.get("id", "")).rpartition("-")[0] if isinstance(item, dict) else ""
            if prefix in names:
                highest[prefix] = max(highest.get(prefix, 0), id_number(item["id"]))
    for name, number in highest.items():
        if number > state.get(SECTION_IDS_KEY, {}).get(name, 0):
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
        entry = {**_new_entry(state, spec, text.strip(), OPERATOR, stamp)}
        entry.update({k: v for k, v in extra.items() if k not in RUNTIME_ENTRY_KEYS and k != "text"})
        entries.append(entry)
        adopted.append(entry["id"])
    if adopted:
        notes.append(f"{name}: adopted {', '.join(adopted)} as the operator's")
    over = len(entries) - spec.limit
    victims = weakest_first(entries)[: max(over, 0)]
    if victims:
        gone = {id(v) for v in victims}
        entries = [e for e in entries if id(e) not in gone]
        leaving.extend(Left.from_section(name, v, "limit") for v in victims)
        notes.append(f"{name}: its limit is {spec.limit}: archived {', '.join(v['id'] for v in victims)}, the weakest")
    state[name] = entries


def _settle_text(state: dict, spec: SectionSpec, leaving: list, notes: list) -> None:
    name, text = spec.name, text_of(state, spec)
    state[name] = text
    if len(text) <= spec.limit or spec.read_only or spec.when_full == "refuse":
        return
    lines = text.split("\n")
    cut = _oldest_lines_over(lines, spec.limit)
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


def loss_problems(before: dict, after: dict, specs: Iterable[SectionSpec], max_loss: float) -> list[str]:
    """The per-cycle bound, checked on the state a cycle would save: of the entries a list section
    began the cycle with, at most `removal_allowance` are gone."""
    found = []
    for spec in specs:
        if not spec.is_list:
            continue
        started = {e.get("id") for e in entries_of(before, spec)}
        gone = started - {e.get("id") for e in entries_of(after, spec)}
        allowed = removal_allowance(len(started), max_loss)
        if len(gone) > allowed:
            found.append(
                f"section '{spec.name}' lost {len(gone)} of the {len(started)} entries it began the cycle with; "
                f"at most {allowed} may leave in one cycle"
            )
    return found


# ------------------------------------------------------------------------------- what is shown


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


def surfaced_summary(state: dict, specs: Iterable[SectionSpec]) -> dict | None:
    """What a cycle's record (the index, the hook's stdin, the metrics) says of `surfaced`: how many,
    and the first SURFACED_IN_RECORD, each text clipped to SURFACED_CHARS. None when no section is
    `surface: true` (the record then stays as it always was)."""
    specs = tuple(specs)
    if not any(spec.surface for spec in specs):
        return None
    found = surfaced(state, specs)
    shown = [
        {
            **item,
            "text": item["text"] if len(item["text"]) <= SURFACED_CHARS else item["text"][: SURFACED_CHARS - 1] + "…",
        }
        for item in found[:SURFACED_IN_RECORD]
    ]
    return {"count": len(found), "entries": shown}
