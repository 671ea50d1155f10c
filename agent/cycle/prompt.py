"""Prompt assembly. The system message (rules + tool list) is byte-identical across iterations and
cycles, so prompt caches hit (a provider's, or llama.cpp's KV cache for the embedded model);
everything that changes goes in the user message, last.

The user message is laid out for the smallest models: the memory sections a home defines (the
most stable first: read-only, then text, then lists, so the bytes a prompt cache keeps reach as far
as they can), the scratchpad as YAML (empty fields left out), then, last, where the model looks
most, the iteration, the task, the result of the previous action and one line saying what to do now.

The worked examples are data (agent/cycle/examples.py): each is rendered by `user_prompt` itself
and passed in each `Request` as a (user, reply) turn, so an example looks exactly like the message
the model will answer.

For the embedded model the *grammar* (never the messages, so the prompt cache still hits) is
shaped per step from the task: see agent/models/local/guidance.py.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, NamedTuple

from agent.common.outcomes import UsageError
from agent.common.safe_yaml import FileRefused, dump_yaml, read_text_file
from agent.common.tags import Outcome, Tag
from agent.memory.specs import Memory
from agent.tools import Registry

TOOLS_MARKER = "{{tools}}"
NOTHING_YET = "none yet"


def default_rules() -> str:
    from importlib import resources  # only for a home without its own rules.md

    return resources.files("agent").joinpath("templates/rules.md").read_text(encoding="utf-8")


# rules.md is a system prompt: past this size it is a mistake (and would not fit a context).
MAX_RULES_BYTES = 1024 * 1024


def read_rules(path: Path) -> str:
    """The home's rules.md, or the packaged default when the home has none. A rules.md that is
    not a readable regular UTF-8 file under MAX_RULES_BYTES (a FIFO, a directory, a device, a
    huge file) is a configuration error (UsageError, exit 2) and never a hang."""
    try:
        text = read_text_file(path, "rules file", MAX_RULES_BYTES)
    except FileRefused as exc:
        raise UsageError(str(exc)) from exc
    return default_rules() if text is None else text


def system_prompt(rules: str, registry: Registry) -> str:
    """The rules with the tool list filled in."""
    listing = registry.prompt_listing()
    if TOOLS_MARKER in rules:
        return rules.replace(TOOLS_MARKER, listing)
    return f"{rules.rstrip()}\n\n## Tools\n\n{listing}\n"


class Preamble(NamedTuple):
    """What every request of a cycle carries before the state, byte-stable across iterations and
    cycles so prompt caches hit: the system message, and the worked examples both as (user, reply)
    turns and as one section of text (a model is sent one or the other; agent/cycle/examples.py)."""

    system: str
    examples: tuple[tuple[str, str], ...] = ()
    examples_text: str = ""

    @property
    def examples_bytes(self) -> int:
        """The larger of the two forms: the user message is fitted with room for either."""
        turn_bytes = sum(len(user.encode()) + len(reply.encode()) for user, reply in self.examples)
        return max(turn_bytes, len(self.examples_text.encode()))


# ------------------------------------------------------------------------------- user message


def next_step(state: dict, previous: Outcome | None) -> str:
    """One plain instruction for this step, from the state and what the previous action did (its tag)."""
    if not state.get("current_task"):
        if state.get("pending_actions"):
            return "There is no current task: call done to start the next pending action."
        return "There is nothing to do: call done."
    if previous is None:
        return "Call the tool that does the task."
    if previous.kind is Tag.CHECK_FAILED:
        return "The task's check failed: fix what it reports, then call done again."
    if previous.kind.is_error:
        return "The last action failed: call a tool with fixed arguments, or call done and say why."
    return "If the last result finishes the task, call done. Otherwise call the next tool."


def without_previous_note(state: dict, previous: Outcome | None) -> dict:
    """`state` as the prompt shows it: after an action, its notes without their last line. That line is
    the previous action's note (the loop adds one note per action, and nothing else between two
    requests), and the prompt shows it once, as "Last result", where the model looks last."""
    if previous is None or not state.get("notes"):
        return state
    return {**state, "notes": state["notes"].rpartition("\n")[0]}


def _compact(state: dict, specs: tuple = ()) -> dict:
    """The fields worth showing: not empty, not last_updated, and not a section (`specs`: shown in
    their own block) nor the sections' id counters."""
    hidden = {"last_updated", *(spec.name for spec in specs), *(["section_ids"] if specs else [])}
    return {k: v for k, v in state.items() if v not in (None, "", [], {}) and k not in hidden}


def user_prompt(
    state: dict,
    iteration: int,
    max_iterations: int,
    warnings: list[str] | None = None,
    previous: Outcome | None = None,
    specs: tuple = (),
) -> str:
    """The changing part: the memory sections (`specs`; the most stable first, so a prompt cache
    keeps them), the scratchpad as YAML, then where this iteration stands and what the `previous`
    action of this cycle did (None: this is its first), whose note `state`'s notes no longer hold
    (`without_previous_note`): each thing is shown once."""
    return "".join(_user_parts(state, iteration, max_iterations, warnings, previous, specs))


def _user_parts(
    state: dict,
    iteration: int,
    max_iterations: int,
    warnings: list[str] | None,
    previous: Outcome | None,
    specs: tuple = (),
) -> tuple[str, str]:
    """The user message in its two parts: the memory and scratchpad block (what fitting may cut) and
    the closing lines (always kept whole)."""
    compact = _compact(state, specs)
    scratchpad = dump_yaml(compact).rstrip() if compact else "(empty)"
    closing = [
        f"Iteration {iteration} of {max_iterations}.",
        f"Task: {state.get('current_task') or 'none'}",
        f"Last result: {NOTHING_YET if previous is None else previous.note}",
        *(warnings or []),
    ]
    if iteration >= max_iterations:
        closing.append("Now: this is the LAST iteration: call done with a summary of what was done.")
    else:
        closing.append(f"Now: {next_step(state, previous)}")
    return f"{Memory(specs).block(state)}## Scratchpad\n\n{scratchpad}\n", "\n" + "\n".join(closing) + "\n"


# ------------------------------------------------------------------------- fitting the prompt
# Legal updates can leave a state whose prompt no endpoint accepts (six 60,000-character completed
# tasks); sending it whole would fail every later cycle. So the user message is rendered from a
# copy whose long strings are clipped (head and tail kept, the middle replaced by a marker), the
# cap halved until the prompt fits `prompt_max_bytes`, with a line telling the model so. If many
# short items still do not fit, the scratchpad block itself is cut and the closing lines kept.
# The state is never changed: only what the model is shown.

SMALLEST_CLIP = 64  # characters of one value worth showing; below this the block is cut instead


def clip_text(text: str, cap: int) -> str:
    if len(text) <= cap:
        return text
    half = cap // 2
    return f"{text[:half]}[... {len(text) - 2 * half} characters clipped ...]{text[len(text) - half :]}"


def clip_strings(value: Any, cap: int) -> Any:
    """A copy of a state value with every string longer than `cap` clipped (states are depth-bounded)."""
    if isinstance(value, dict):
        return {k: clip_strings(v, cap) for k, v in value.items()}
    if isinstance(value, list):
        return [clip_strings(v, cap) for v in value]
    return clip_text(value, cap) if isinstance(value, str) else value


def fitted_user_prompt(
    system: str,
    state: dict,
    iteration: int,
    settings: Any,
    warnings: list[str] | None = None,
    previous: Outcome | None = None,
    others: int = 0,
) -> str:
    """`user_prompt`, clipped so that the system text, `others` bytes sent besides (the example
    turns) and the user message fit `prompt_max_bytes` (when they can at all)."""
    max_iterations, max_bytes, warnings = settings.max_iterations, settings.prompt_max_bytes, list(warnings or [])
    specs = settings.section_specs  # empty for a home without sections: the prompt msa's fields make
    state = without_previous_note(state, previous)
    user = user_prompt(state, iteration, max_iterations, warnings, previous, specs)
    room = max(max_bytes - len(system.encode()) - others, max_bytes // 4)  # a huge system never empties the user's
    full = len(user.encode())
    if full <= room:
        return user
    note = (
        f"Note: the scratchpad is too large for one prompt ({full} bytes; prompt_max_bytes is {max_bytes}): "
        f"long values are shown clipped. Keep notes and tasks short."
    )
    cap = max(SMALLEST_CLIP, room // 4)
    while True:
        clipped = previous and dataclasses.replace(previous, note=clip_text(previous.note, cap))
        block, closing = _user_parts(
            clip_strings(state, cap), iteration, max_iterations, [*warnings, note], clipped, specs
        )
        if len((block + closing).encode()) <= room or cap <= SMALLEST_CLIP:
            break
        cap //= 2
    if len((block + closing).encode()) <= room:
        return block + closing
    return _cut_block(block, closing, room)


def _cut_block(block: str, closing: str, room: int) -> str:
    """The scratchpad block cut to what fits beside the closing lines, which are kept whole."""
    marker = "\n[... the rest of the scratchpad is cut: it does not fit prompt_max_bytes ...]"
    keep = max(0, room - len(closing.encode()) - len(marker.encode()))
    return block.encode()[:keep].decode("utf-8", errors="ignore") + marker + closing
