"""The reflect step: one more model call after the loop, one path over one edit grammar.

Everything reflect may write is a section edited with the sections' grammar (agent/memory/section_edits.py):
"APPEND: text" adds a line (a list: an entry), "REMOVE: id" takes a list's entry out, "CLEAR" empties
a text, any other value replaces a text. `notes` is a built-in text section of it (`NOTES`): no
limit of its own at the edit (`notes_budget` bounds it when it settles at sleep, agent/memory/builtin.py),
and what leaves it is archived line by line as notes always were (kind `note`, reason `reflect`).
For the prompt the notes were always curated with (curate_notes: "APPEND: <text>" or "CLEAR"), the
notes alone read those two spellings case aside.

What the call offers is the one thing a home decides (`offer`): without operator sections,
`curate_notes` over the notes with the notes' rules and the scratchpad, byte for byte the request
it always was; with them, seed 000's second phase, `update_scratchpad` over the notes and the
writable sections. Either way the reply is applied by `apply_edits` under every rule of an update (the
cycle's share of removals included) and checked against the state's invariants: any failure or
refusal keeps the unreflected state, and an interrupt is not caught.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from agent.common.safe_yaml import dump_yaml
from agent.memory.builtin import NOTES, RULES
from agent.memory.one_call import ask_once
from agent.memory.section_block import render
from agent.memory.sections import APPEND, CLEAR
from agent.memory.specs import Edits
from agent.models.replies import ReplyError
from agent.secrets import Secrets
from agent.setting_checks import edit_schemas
from agent.state import SECTION_IDS_KEY, InvariantViolation, invariant_problems
from agent.store.archive import Left
from agent.tools import Tool

NOTES_RULES = """# Reflect

The cycle's work is done. Now curate the notes so the next cycle starts from a short, useful memory.
Reply with one JSON object: {"tool": "curate_notes", "args": {"notes": "..."}} where notes is one of:

- "APPEND: <text>" to add a line (use this when the notes are already short and clear);
- a full replacement: a short, structured summary of the facts worth keeping, one per line,
  for example "Known: ...", "Open: ...", "Next: ...";
- "CLEAR" when nothing in the notes is worth keeping.

Replaced or cleared lines are archived, not lost. Keep what the next task needs; drop tool chatter.
"""

# Seed 000's second phase, for a home with operator sections: the observer of the cycle, not its worker.
SECTIONS_RULES = """# Reflect

The cycle's work is over. You are now the observer of that work, not the worker: update the memory
so that the next cycle starts from what is true and useful. Your one tool is update_scratchpad.

- Minimal: most cycles change one or two sections. Send only the sections that changed; when
  nothing changed, send no arguments: {"tool": "update_scratchpad", "args": {}}.
- Honest: if something turned out uncertain or wrong, say so where it belongs.
- Forward-looking: keep what a later cycle will need, not a record of what happened.
- Preserve what matters: a fact that still holds is confirmed by sending it again ("APPEND: "
  and the same text); REMOVE only what is wrong or answered. What leaves is archived.

Reply with one JSON object: {"tool": "update_scratchpad", "args": {"SECTION": "VALUE", ...}}.
"""

NOTES_VALUE = 'The notes: "APPEND: <text>" adds a line; "CLEAR" empties them; any other value replaces them.'


@dataclass(frozen=True)
class Offer:
    """What the reflect call is: its rules, its prompt and its one tool."""

    rules: str
    prompt: str
    tool: Tool


def notes_tool() -> Tool:
    """Reflect's only tool in a home without operator sections; its schema constrains the model's reply."""
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


def sections_tool(specs: Any) -> Tool:
    """Reflect's only tool in a home with operator sections: update_scratchpad over the notes and the writable
    sections."""
    return Tool(
        name="update_scratchpad",
        description="Update the memory: only the sections that changed (none: no arguments).",
        args_schema={
            "type": "object",
            "properties": {"notes": {"type": "string", "description": NOTES_VALUE}, **edit_schemas(tuple(specs))},
            "required": [],
            "additionalProperties": False,
        },
        side_effects=False,
    )


def offer(state: dict, sections: Edits) -> Offer:
    """The call a home's reflect makes on `state` (already redacted): `sections`, the cycle's Edits."""
    if not sections.specs:
        return Offer(NOTES_RULES, _prompt("", state, "Curate the notes now."), notes_tool())
    names = {spec.name for spec in sections.specs} | {SECTION_IDS_KEY, "last_updated"}
    rest = {k: v for k, v in state.items() if k not in names and v not in (None, "", [], {})}
    block = render(state, sections.specs).rstrip() + "\n\n"
    return Offer(
        SECTIONS_RULES,
        _prompt(block, rest, "Update the memory now: only the sections that changed."),
        sections_tool(sections.specs),
    )


def _prompt(block: str, shown: dict, ask: str) -> str:
    scratchpad = "\n".join(["## Scratchpad", "", "```yaml", dump_yaml(shown).rstrip(), "```", ""])
    return f"{block}{scratchpad}\n{ask} Reply with one JSON action.\n"


def notes_value(value: Any) -> Any:
    """The notes' value in the one grammar: the old prompt's "append:" and "clear" read case aside."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.upper().startswith(APPEND):
        return APPEND + text[len(APPEND) :]
    return CLEAR if text.upper() == CLEAR else value


def apply(state: dict, edits: dict, sections: Edits) -> tuple[dict, list, tuple[str, ...]]:
    """A reflect reply's arguments applied as one update: (the state, what left it: the notes' old
    lines as archived notes first, then the sections' items; what was done); ReplyError when the
    update is refused."""
    edits = {k: (notes_value(v) if k == NOTES.name else v) for k, v in edits.items()}
    change = dataclasses.replace(sections, specs=(NOTES, *sections.specs)).apply(state, edits)
    if change.refusal:
        raise ReplyError(f"{'update_scratchpad' if sections.specs else 'curate_notes'} refused: {change.refusal}")
    notes = [
        Left(RULES["notes"].leaves_as, line, "reflect")
        for item in change.leaving
        if item.section == NOTES.name
        for line in item.value.split("\n")
        if line
    ]
    return change.state, [*notes, *(item for item in change.leaving if item.section != NOTES.name)], change.notes


def reflect(
    model: Any,
    before: dict,
    state: dict,
    sections: Edits,
    usage: Any,
    log: Callable[[str], None],
    timeout: float | None = None,
    secrets: Secrets | None = None,
) -> tuple[dict, list, str]:
    """After the loop: one more model call that updates the memory, within `timeout` seconds (None:
    no budget), shown the state with `secrets` redacted like every prompt of the loop. `sections`: the
    cycle's Edits (no specs in a home without operator sections). Returns (state, what left memory, status)."""
    redact = secrets.redact if secrets else (lambda value: value)
    try:
        call = offer(redact(state), sections)
        args = ask_once(
            model, call.rules, call.prompt, call.tool, usage, log, purpose="reflect", timeout=timeout, secrets=secrets
        )
        after, leaving, done = apply(state, redact(args), sections)
        broken = invariant_problems(before, after) + sections.problems(after)
        if broken:
            raise InvariantViolation("; ".join(broken))
    except Exception as exc:
        log(f"reflect step failed, keeping the unreflected state: {type(exc).__name__}: {exc}")
        return state, [], f"kept unreflected: {type(exc).__name__}: {exc}"
    lines = sum(item.kind == RULES["notes"].leaves_as for item in leaving)
    log(f"reflect: {'; '.join(done) or 'nothing changed'} ({lines} note line(s) archived)")
    return after, leaving, "applied"
