"""Consolidation: the model rewrites list sections, and the runtime proves nothing was lost.

A consolidation reply names list sections and gives each its new entries: an entry kept as it is
(`{"id": "known-9"}`) or a successor (`{"text": "...", "cites": ["known-3", "known-7"]}`); ids that
leave without a successor are named in `archive`. A section the reply does not name is unchanged.

    {"sections": {"known": [{"id": "known-9"}, {"text": "...", "cites": ["known-3", "known-7"]}]},
     "archive": ["known-4"]}

`check_consolidation` accepts it only when, for every section it names, all of these hold (the
citation-superset invariant of seed 002, with a bounded loss):

  (a) every id the section held ends in exactly one place: kept, cited by exactly one successor, or
      archived; `cites` and `archive` name only ids the section held;
  (b) entries after >= ceil((1 - consolidate_max_loss) x entries before): merging n into one costs n - 1,
      except a merge that loses nothing: sources the runtime finds near-identical (every two share at
      least `consolidate_near_identical` of their words, as read and case aside) and a successor that
      keeps every word of each; it costs 1, whatever n (so a run still shrinks a section by at most
      the share: ten entries never become four, however alike);
  (c) successors earn nothing: `days` the least of their sources', `merged_from` their sources,
      `by: model`; a successor cites at least one id, and its text is one line, no longer than its
      sources' texts together, within entry_chars, and says what no other entry after the run says
      (as read and case aside, as APPEND matches: agent/common/reading.py);
  (d) an operator entry is kept as it is (never merged, never archived); an entry stated on 2 days
      or more, or a successor of one (it carries `protected: true`), is kept or has a successor, never
      archived bare;
  (e) nothing else changes: only writable list sections may be named, and every limit holds;
  (f) a successor stands for at most `consolidate_max_lineage` original entries, counting what each of
      its sources stood for (`stands_for`, runtime-owned): loss is bounded across runs too, so 5 -> 3 -> 1
      over two nights, or a chain of merges ending with one line for a dozen facts, is refused.

Anything else is a list of violations and the caller keeps active.yaml byte-identical. The reply's
size is bounded before it is parsed (`reply_cap`), and every check refuses an oversized part before
it looks inside it, so a 10,000-entry reply costs no more than a small one. Pure: the caller
archives what leaves (each record naming the successor that replaced it) before it writes the state.
"""

from __future__ import annotations

import copy
import itertools
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from agent.common.escape import escape_controls
from agent.common.plain import described
from agent.common.reading import as_read, reads_empty
from agent.config import Settings
from agent.memory.builtin import Change, Stamp
from agent.memory.sections import (
    MODEL,
    OPERATOR,
    PROTECTED_DAYS,
    RUNTIME_ENTRY_KEYS,
    entries_of,
    lineage,
    most_lost,
    next_id,
    protected,
    said,
    shown_id,
    specs_by_name,
)
from agent.models.replies import ReplyError, parse_reply
from agent.setting_checks import SECTION_NAME, SectionSpec
from agent.store.archive import Left
from agent.tools import Tool

TOOL_NAME = "consolidate"
# Violations listed at most (a reply that breaks every rule 10,000 times gets a bounded answer).
MOST_VIOLATIONS = 20
# Places of one id a violation names at most (an id cited by 1,000 successors gets one short line).
PLACES_SHOWN = 3
# Bytes a reply may take beyond its entries: the JSON's frame, whitespace, a little prose.
REPLY_SLACK_BYTES = 4096
# Bytes one id may take in a reply, quotes, comma and some whitespace included.
ID_BYTES = 64


@dataclass(frozen=True)
class Reverted:
    violations: tuple[str, ...]


@dataclass
class _Violations:
    found: list[str] = field(default_factory=list)
    more: int = 0

    def add(self, text: str) -> None:
        if len(self.found) < MOST_VIOLATIONS:
            self.found.append(text)
        else:
            self.more += 1

    def __bool__(self) -> bool:
        return bool(self.found)

    def reverted(self) -> Reverted:
        tail = [f"... and {self.more} more"] if self.more else []
        return Reverted(tuple(self.found + tail))


# --------------------------------------------------------------------- what the model is offered


def consolidatable(specs: Iterable[SectionSpec]) -> list[SectionSpec]:
    """The sections a consolidation may rewrite: the writable lists (none: the run is idle)."""
    return [spec for spec in specs if spec.is_list and not spec.read_only]


def _entries_schema(spec: SectionSpec, held: int) -> dict:
    """What one section's new entries may be, with bounds of their own (a grammar built from it can
    express the whole section: a model's step default of 8 items could not)."""
    most = max(spec.limit, held)
    an_id = {"type": "string", "maxLength": ID_BYTES}
    kept = {"type": "object", "properties": {"id": an_id}, "required": ["id"], "additionalProperties": False}
    successor = {
        "type": "object",
        "properties": {
            "text": {"type": "string", "maxLength": spec.entry_chars},
            "cites": {"type": "array", "items": an_id, "maxItems": most},
        },
        "required": ["text", "cites"],
        "additionalProperties": False,
    }
    return {"type": "array", "items": {"anyOf": [kept, successor]}, "maxItems": most}


def consolidate_tool(specs: Iterable[SectionSpec], state: dict | None = None) -> Tool:
    """The consolidation's only tool, its schema generated from the sections (and their sizes in
    `state`: a section over its limit may be given back whole)."""
    sections = consolidatable(specs)
    held = {spec.name: len(entries_of(state or {}, spec)) for spec in sections}
    return Tool(
        name=TOOL_NAME,
        description=(
            "Rewrite list sections: for each section you name, its new entries in order, each either "
            '{"id": ID} (kept as it is) or {"text": TEXT, "cites": [IDS]} (a successor standing for the '
            "entries it cites); archive: the ids that leave without a successor. Every id of a named "
            "section must end in exactly one place."
        ),
        args_schema={
            "type": "object",
            "properties": {
                "sections": {
                    "type": "object",
                    "properties": {spec.name: _entries_schema(spec, held[spec.name]) for spec in sections},
                    "additionalProperties": False,
                },
                "archive": {
                    "type": "array",
                    "items": {"type": "string", "maxLength": ID_BYTES},
                    "maxItems": max(1, sum(held.values())),
                },
            },
            "required": ["sections"],
            "additionalProperties": False,
        },
        side_effects=False,
    )


def reply_cap(state: dict, specs: Iterable[SectionSpec]) -> int:
    """The most bytes a valid reply for `state` can take: every section at its limit (or its present
    size, if larger) of successors at entry_chars characters (each escaped to 6 bytes at worst), and
    every id it holds named once. Larger is refused before it is parsed."""
    total = REPLY_SLACK_BYTES
    for spec in consolidatable(specs):
        held = len(entries_of(state, spec))
        total += max(spec.limit, held) * (6 * spec.entry_chars + ID_BYTES) + held * ID_BYTES
    return total


def reply_tokens(state: dict, specs: Iterable[SectionSpec]) -> int:
    """The most tokens a consolidation's reply may need: every entry of every section it may rewrite
    given back (a successor is no longer than its sources, so the texts held bound the texts sent),
    at two characters a token and some for each entry's frame."""
    total = 64
    for spec in consolidatable(specs):
        total += sum(len(str(e.get("text", ""))) // 2 + 16 for e in entries_of(state, spec))
    return total


CONSOLIDATE_RULES = """# Consolidate

You are tidying a long-running agent's memory. Rewrite its list sections so that they say the same
in fewer, better entries: merge entries that say the same or belong together, drop what is stale,
keep what still holds. The runtime checks every rule below; if one fails, nothing changes at all.

For each section you rewrite, give its new entries in order, each either {"id": ID} (kept as it is)
or {"text": TEXT, "cites": [IDS]} (a new entry standing for the entries it cites). Put the ids of
entries that leave without a successor in "archive". A section you do not name stays as it is.

(a) Every id the section held ends in exactly one place: kept, cited by exactly one new entry, or
    archived. Cite only ids of that section.
(b) Shrink by at most the share shown: merging n entries into one counts n - 1, unless they say the
    same (nearly the same words) and the new entry keeps every word of each: that counts 1.
(c) A new entry adds no facts: it cites at least one id, is one line, is no longer than the entries
    it cites together, and says something no other entry says.
(d) An operator entry is kept as it is. An entry marked protected is kept or cited, never archived.
(e) Do not touch anything else.
(f) A new entry stands for at most the original entries shown, counting what each entry it cites
    stands for (marked "stands for N").

Reply with one JSON object: {"tool": "consolidate", "args": {"sections": {...}, "archive": [...]}}.
"""


def consolidate_prompt(state: dict, specs: Iterable[SectionSpec], max_loss: float | Bounds) -> str:
    """What the consolidation is shown: each section it may rewrite, every entry with its id, its
    strength, whose it is and what it stands for, and the most the section may lose."""
    bounds = max_loss if isinstance(max_loss, Bounds) else Bounds(max_loss)
    lines = [f"A new entry stands for at most {bounds.max_lineage} original entries.", ""]
    for spec in consolidatable(specs):
        entries = entries_of(state, spec)
        if not entries:
            continue
        least = len(entries) - most_lost(len(entries), bounds.max_loss)
        lines += [
            f"## {spec.name} ({len(entries)} entries; keep at least {least}; at most {spec.limit})",
            *([escape_controls(spec.description)] if spec.description else []),
        ]
        for entry in entries:
            tags = [f"{entry.get('days', 1)} day(s)", *(["operator"] if entry.get("by") == OPERATOR else [])]
            tags += ["protected"] if protected(entry) and entry.get("by") != OPERATOR else []
            tags += [f"stands for {lineage(entry)}"] if lineage(entry) > 1 else []
            lines.append(
                f"- {escape_controls(entry.get('id'))} [{', '.join(tags)}] {escape_controls(entry.get('text', ''))}"
            )
        lines.append("")
    return "\n".join([*lines, "Consolidate now. Reply with one JSON action."]) + "\n"


def parse_consolidation(reply: Any, state: dict, specs: Iterable[SectionSpec]) -> dict | Reverted:
    """The arguments of a reply's consolidate call, its size bounded by `reply_cap` before parsing;
    Reverted says why there are none."""
    try:
        action = parse_reply(reply, reply_cap(state, specs))
    except ReplyError as exc:
        return Reverted((f"the reply cannot be used: {exc}",))
    if action.get("tool") != TOOL_NAME:
        return Reverted((f"the reply calls {shown_id(action.get('tool'))}, not {TOOL_NAME}",))
    return action.get("args")


# ----------------------------------------------------------------------------------- checking


@dataclass(frozen=True)
class Bounds:
    """What a consolidation may lose: per run (`max_loss`, rule b), across runs (`max_lineage`,
    rule f), and how alike sources must be for a merge to lose nothing (`near_identical`)."""

    max_loss: float
    max_lineage: int = Settings.consolidate_max_lineage
    near_identical: float = Settings.consolidate_near_identical

    @classmethod
    def of(cls, settings: Settings) -> Bounds:
        return cls(settings.consolidate_max_loss, settings.consolidate_max_lineage, settings.consolidate_near_identical)


def check_consolidation(
    state: dict,
    specs: Iterable[SectionSpec],
    args: Any,
    *,
    max_loss: float | Bounds,
    stamp: Stamp,
) -> Change | Reverted:
    """Accept a consolidation (`args`, as the model sent them) of `state`: the new state, what left
    (each with the id of its successor, if any) and a note per section; or Reverted with every
    violation found (at most MOST_VIOLATIONS). `max_loss`: the Bounds (or consolidate_max_loss alone,
    the other bounds at their defaults)."""
    bounds = max_loss if isinstance(max_loss, Bounds) else Bounds(max_loss)
    specs = tuple(specs)
    found = _Violations()
    owner = {e.get("id"): spec.name for spec in specs if spec.is_list for e in entries_of(state, spec)}
    shape = _shape(args, specs, len(owner), found)
    if shape is None:
        return found.reverted()
    sections, archive = shape
    archived = _archive_by_section(archive, sections, owner, found)
    by_name = specs_by_name(specs)
    for name, items in sections.items():
        _check_section(state, by_name[name], items, archived.get(name, []), owner, bounds, found)
    if found:
        return found.reverted()
    return _applied(state, by_name, sections, archived, stamp)


def _shape(args: Any, specs: tuple[SectionSpec, ...], held: int, found: _Violations) -> tuple[dict, list] | None:
    """(sections to rewrite -> their items, archive) when the reply has the right shape and sizes,
    else None with the violations added. `held`: the entries of every list section. Sizes are
    checked before anything is looked into."""
    if not isinstance(args, dict) or not isinstance(args.get("sections"), dict):
        found.add(
            f'the arguments must be {{"sections": {{SECTION: [entries]}}, "archive": [ids]}}, got {described(args)}'
        )
        return None
    for key in args:
        if key not in ("sections", "archive"):
            found.add(f"the arguments have an unexpected key {shown_id(key)} (keys: sections, archive)")
    archive = args.get("archive", [])
    if not isinstance(archive, list):
        found.add(f"archive must be a list of ids, got {described(archive)}")
    elif len(archive) > held:
        found.add(f"(a) archive names {len(archive)} ids; the sections held {held} entries in all")
    elif not all(isinstance(i, str) for i in archive):
        found.add(f"archive must be a list of ids (strings), got {described(archive)}")
    by_name = specs_by_name(specs)
    sections = {}
    for name, items in args["sections"].items():
        spec = by_name.get(name)
        problem = _section_problem(name, spec, items)
        if problem:
            found.add(problem)
            continue
        sections[name] = items
    return (sections, archive) if not found else None


def _section_problem(name: Any, spec: SectionSpec | None, items: Any) -> str | None:
    if spec is None:
        shown = f"'{name}'" if isinstance(name, str) and SECTION_NAME.fullmatch(name) else described(name)
        return f"(e) {shown} is not a section of config.yaml"
    if not spec.is_list:
        return f"(e) '{name}' is a text section: consolidation rewrites list sections only"
    if spec.read_only:
        return f"(e) '{name}' is read-only: consolidation cannot rewrite it"
    if not isinstance(items, list):
        return f"(e) '{name}' must be given a list of entries, got {described(items)}"
    return None


def _archive_by_section(archive: list, sections: dict, owner: dict, found: _Violations) -> dict[str, list[str]]:
    """The archived ids by the section they were in; an id of no section, or of a section the reply
    does not name, is a violation."""
    out: dict[str, list[str]] = {}
    for entry_id in archive:
        section = owner.get(entry_id)
        if section is None:
            found.add(f"(a) archive names {shown_id(entry_id)}, which no section held")
        elif section not in sections:
            found.add(
                f"(a) archive names {entry_id} of '{section}', a section the reply does not rewrite "
                f"(name the section with its entries to archive from it)"
            )
        else:
            out.setdefault(section, []).append(entry_id)
    return out


def _check_section(
    state: dict,
    spec: SectionSpec,
    items: list,
    archived: list[str],
    owner: dict,
    bounds: Bounds,
    found: _Violations,
) -> None:
    name, before = spec.name, {e.get("id"): e for e in entries_of(state, spec)}
    if len(items) > max(spec.limit, len(before)):
        found.add(f"(e) {name}: the reply gives {len(items)} entries; the section holds at most {spec.limit}")
        return  # nothing inside is looked at: its size alone refuses it
    places: dict[str, list[str]] = {}
    for index, item in enumerate(items):
        _check_item(spec, index, item, before, owner, places, found)
    _check_repeats(spec, items, before, found)
    for entry_id in archived:
        places.setdefault(entry_id, []).append("archived")
    for entry_id, entry in before.items():
        _check_places(spec, entry_id, entry, places.get(entry_id, []), found)
    credit = _lineage_and_credit(spec, items, before, bounds, found)
    least = len(before) - most_lost(len(before), bounds.max_loss) - credit
    if len(items) < least:
        found.add(
            f"(b) {name}: {len(items)} entries after, fewer than the {least} that must stay of {len(before)} "
            f"(consolidate_max_loss {bounds.max_loss}; merging n entries into one costs n - 1"
            + (f"; {credit} more may go by merges that lose nothing" if credit else "")
            + ")"
        )


def _lineage_and_credit(spec: SectionSpec, items: list, before: dict, bounds: Bounds, found: _Violations) -> int:
    """Rule (f) for each successor (a violation added for one standing for too many), and the entries
    that merges losing nothing take off rule (b)'s count: such a merge of n costs 1, not n - 1."""
    credit = 0
    for index, item in enumerate(items):
        cites = item.get("cites") if isinstance(item, dict) and "id" not in item else None
        if not isinstance(cites, list) or not isinstance(item.get("text"), str):
            continue  # not a successor, or one whose shape rule (c) refused
        sources = [before[c] for c in cites if isinstance(c, str) and c in before]
        stands = sum(lineage(s) for s in sources)
        if stands > bounds.max_lineage:
            found.add(
                f"(f) {spec.name}[{index}] would stand for {stands} original entries (what its sources stood "
                f"for); at most {bounds.max_lineage} (consolidate_max_lineage)"
            )
        elif len(sources) == len(cites) > 1 and _loses_nothing(
            item["text"], [s.get("text", "") for s in sources], bounds
        ):
            credit += len(sources) - 2
    return credit


_WORD = re.compile(r"\w+")


def _words(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(said(text)))  # the words of what it says, as APPEND reads it


def _loses_nothing(text: str, sources: list[str], bounds: Bounds) -> bool:
    """Whether a merge of `sources` into `text` loses nothing: every two sources near-identical (the
    words they share over all their words at least `near_identical`) and `text` keeps every word."""
    words = [_words(source) for source in sources]
    kept = _words(text)
    if not all(w <= kept for w in words):
        return False
    return all(len(a & b) >= bounds.near_identical * len(a | b) for a, b in itertools.combinations(words, 2))


def _check_item(
    spec: SectionSpec, index: int, item: Any, before: dict, owner: dict, places: dict, found: _Violations
) -> None:
    where = f"{spec.name}[{index}]"
    if not isinstance(item, dict):
        found.add(f'{where} must be {{"id": ID}} or {{"text": TEXT, "cites": [IDS]}}, got {described(item)}')
        return
    forged = sorted(str(k) for k in item if k in RUNTIME_ENTRY_KEYS - {"id"})
    unexpected = sorted(str(k) for k in item if k not in RUNTIME_ENTRY_KEYS | {"text", "cites"})
    if forged:
        found.add(f"{where} sets the runtime-owned field '{forged[0]}': only the runtime writes it")
    elif unexpected:
        found.add(
            f'{where} has an unexpected key {shown_id(unexpected[0])} (an entry is {{"id"}} or {{"text", "cites"}})'
        )
    elif "id" in item and ("text" in item or "cites" in item):
        found.add(
            f'{where} has an id and a text: keep an entry as {{"id"}} alone, or reword it as a successor citing it'
        )
    elif "id" in item:
        _place(spec, where, item["id"], "kept", before, owner, places, found)
    else:
        _check_successor(spec, where, item, before, owner, places, found)


def _place(
    spec: SectionSpec, where: str, entry_id: Any, how: str, before: dict, owner: dict, places: dict, found: _Violations
) -> bool:
    """Record that `entry_id` ends up `how` (kept, cited by ...); False (a violation added) when it
    names no entry of this section."""
    if not isinstance(entry_id, str):
        found.add(f"(a) {where}: an id must be a string, got {described(entry_id)}")
        return False
    if entry_id not in before:
        other = owner.get(entry_id)
        whose = f"an entry of '{other}', not of '{spec.name}'" if other else f"which '{spec.name}' never held"
        found.add(f"(a) {where} {'keeps' if how == 'kept' else 'cites'} {shown_id(entry_id)}, {whose}")
        return False
    places.setdefault(entry_id, []).append(how)
    return True


def _check_successor(
    spec: SectionSpec, where: str, item: dict, before: dict, owner: dict, places: dict, found: _Violations
) -> None:
    text, cites = item.get("text"), item.get("cites")
    if not isinstance(text, str) or reads_empty(text) or len(text.strip().splitlines()) > 1:
        found.add(f"(c) {where}: a successor's text must be one line of text, got {described(text)}")
        return
    if not isinstance(cites, list) or not cites:
        found.add(f"(c) {where} cites nothing: consolidation merges what is there, it adds no facts")
        return
    if len(cites) > len(before):
        found.add(f"(a) {where} cites {len(cites)} ids; '{spec.name}' held {len(before)}")
        return
    sources = [c for c in cites if _place(spec, where, c, f"cited by {where}", before, owner, places, found)]
    text = text.strip()
    if len(text) > spec.entry_chars:
        found.add(f"(c) {where} is {len(text)} characters, over entry_chars ({spec.entry_chars})")
    # as read: invisible characters in its sources buy a successor no room, nor do its own count
    budget = sum(len(as_read(before[c].get("text", ""))) for c in sources)
    if len(sources) == len(cites) and len(as_read(text)) > budget:
        found.add(f"(c) {where} is {len(as_read(text))} characters, longer than its sources together ({budget})")


def _check_repeats(spec: SectionSpec, items: list, before: dict, found: _Violations) -> None:
    """A successor says something no other entry after the run says (as read and case aside, as
    APPEND matches: agent/common/reading.py): a successor repeating a kept entry would drop what its sources said while its
    ids add up, and give the repeated statement days it never earned."""
    first: dict[str, tuple[str, bool]] = {}  # what is said -> where first, and whether by a successor
    for index, item in enumerate(items):
        successor = isinstance(item, dict) and "id" not in item
        kept = isinstance(item, dict) and isinstance(item.get("id"), str)
        text = item.get("text") if successor else before.get(item["id"], {}).get("text") if kept else None
        if not isinstance(text, str):
            continue
        where, key = f"{spec.name}[{index}]", said(text)
        if key in first and (successor or first[key][1]):
            found.add(
                f"(c) {where} says what {first[key][0]} says (case and spacing aside): cite what it repeats instead"
            )
        first.setdefault(key, (where, successor))


def _check_places(spec: SectionSpec, entry_id: str, entry: dict, where: list[str], found: _Violations) -> None:
    name = spec.name
    if not where:
        found.add(
            f'(a) {name}: {entry_id} is in no place: keep it ({{"id": "{entry_id}"}}), cite it from a successor, '
            f"or archive it"
        )
        return
    if len(where) > 1:
        shown = ", ".join(where[:PLACES_SHOWN]) + (", ..." if len(where) > PLACES_SHOWN else "")
        found.add(f"(a) {name}: {entry_id} is in {len(where)} places ({shown}); it must be in exactly one")
        return
    if entry.get("by") == OPERATOR and where != ["kept"]:
        found.add(f"(d) {name}: {entry_id} is the operator's: keep it as it is; it is never merged or archived")
    elif where == ["archived"] and protected(entry):
        why = (
            f"was stated on {entry['days']} days"
            if entry.get("days", 1) >= PROTECTED_DAYS
            else "succeeds a protected entry"
        )
        found.add(f"(d) {name}: {entry_id} {why}: keep it or cite it from a successor; it is never archived bare")


# ----------------------------------------------------------------------------------- applying


def _applied(state: dict, by_name: dict, sections: dict, archived: dict, stamp: Stamp) -> Change:
    new, leaving, notes = copy.deepcopy(state), [], []
    for name, items in sections.items():
        spec = by_name[name]
        before = {e["id"]: e for e in entries_of(state, spec)}
        entries, merged = [], 0
        for item in items:
            if "id" in item:
                entries.append(copy.deepcopy(before[item["id"]]))
                continue
            sources = [before[c] for c in item["cites"]]
            successor = {
                "id": next_id(new, name),
                "text": item["text"].strip(),
                "by": MODEL,
                "added": stamp.cycle,
                "days": min(s.get("days", 1) for s in sources),
                "last_day": min(str(s.get("last_day")) for s in sources),
                "merged_from": [s["id"] for s in sources],
            }
            stands = sum(lineage(s) for s in sources)
            if stands != len(sources):  # a source was itself a successor (else merged_from says it)
                successor["stands_for"] = stands
            if any(protected(s) for s in sources):
                successor["protected"] = True  # protection is not laundered by merging with a weaker entry
            entries.append(successor)
            merged += len(sources)
            leaving += [Left.from_section(name, copy.deepcopy(s), "consolidate", successor["id"]) for s in sources]
        leaving += [Left.from_section(name, copy.deepcopy(before[i]), "consolidate") for i in archived.get(name, [])]
        new[name] = entries
        notes.append(
            f"{name}: {len(before)} -> {len(entries)} entries ({merged} into successors, "
            f"{len(archived.get(name, []))} archived)"
        )
    return Change(new, tuple(leaving), tuple(notes))
