"""Sections: the operator's own parts of the scratchpad (`sections` in config.yaml, checked into
`SectionSpec`s by agent/setting_checks.py): their entries and ids, and the rules a state's sections
must keep.

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
the archive: each change returns what left (`Left`, agent/store/archive.py: the archive's one
record type) beside the new state, and the caller appends it to the archive before it saves the
state. Nothing is cut: a value that does not fit is refused with a message the model reads.

Pure functions, state in and a `Change` out, never raising for what the model sent. Whether a
home has operator sections is asked in one place, `Memory` (agent/memory/specs.py): a home without
them loads these modules only for a built-in section's edit (reflect's `notes`, in the one
grammar), and behaves byte for byte as before. The rest of the machinery, one module a
responsibility, is listed in agent/memory/__init__.py. Here: the entries' fields and ids
(`next_id`, `lineage`, `weakest_first`, `fill`...) and the state's rules (`kind_conflict`,
`checked`, `state_problems`).
"""

from __future__ import annotations

import datetime as _dt
import re
from fractions import Fraction
from typing import Any, Iterable

from agent.common.outcomes import InvalidScratchpad, UsageError
from agent.common.plain import described
from agent.common.reading import as_read
from agent.memory.builtin import Stamp
from agent.setting_checks import SectionSpec
from agent.state import SECTION_IDS_KEY

APPEND, REMOVE, CLEAR = "APPEND:", "REMOVE:", "CLEAR"
MODEL, OPERATOR = "model", "operator"
# The fields of an entry only the runtime writes.
RUNTIME_ENTRY_KEYS = frozenset({"id", "by", "added", "days", "last_day", "merged_from", "protected", "stands_for"})
# The days on which an entry must have been stated to be protected (never archived bare by a consolidation).
PROTECTED_DAYS = 2
DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


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


# The most digits an id's number is read with: ids the runtime makes never get near it, and int()
# refuses strings past 4,300 digits.
ID_DIGITS = 18
ID_NUMBER = re.compile(f"[0-9]{{1,{ID_DIGITS}}}")


def id_number(entry_id: Any) -> int:
    """The counter part of an id `<section>-<n>` (0 for an id of another form: a hand-written
    "known-²" or "known-٣" is not a number the runtime wrote, nor are 5,000 digits)."""
    number = str(entry_id).rpartition("-")[2]
    return int(number) if ID_NUMBER.fullmatch(number) else 0


def raised_ids(highest: dict[str, int], ids: Iterable[Any]) -> dict[str, int]:
    """`highest` (section name -> number) raised to the number of each id `<section>-<n>` in `ids`;
    anything else in `ids` is passed over."""
    raised = dict(highest)
    for entry_id in ids:
        section = entry_id.rpartition("-")[0] if isinstance(entry_id, str) else ""
        if section and id_number(entry_id) > raised.get(section, 0):
            raised[section] = id_number(entry_id)
    return raised


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


def without(entries: list[dict], gone: list[dict]) -> list[dict]:
    """`entries` less the very entries `gone` (by identity: two entries may be equal)."""
    ids = {id(entry) for entry in gone}
    return [entry for entry in entries if id(entry) not in ids]


def next_id(state: dict, name: str) -> str:
    """The next id of section `name` (its counter under SECTION_IDS_KEY, advanced in `state`)."""
    counters = state.setdefault(SECTION_IDS_KEY, {})
    number = counters.get(name, 0) + 1
    counters[name] = number
    return f"{name}-{number}"


def new_entry(state: dict, spec: SectionSpec, text: str, by: str, stamp: Stamp) -> dict:
    return {
        "id": next_id(state, spec.name),
        "text": text,
        "by": by,
        "added": stamp.cycle,
        "days": 1,
        "last_day": stamp.day,
    }


def fill(state: dict, spec: SectionSpec) -> str:
    """The fill gauge: `12/30` (entries) or `410/600 characters`."""
    if spec.is_list:
        return f"{len(entries_of(state, spec))}/{spec.limit}"
    return f"{len(text_of(state, spec))}/{spec.limit} characters"


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
