"""Prompt assembly. The system message (rules + tool list) is byte-identical across iterations and
cycles, so prompt caches hit (a provider's, or llama.cpp's KV cache for the embedded model);
everything that changes goes in the user message, last.

The user message is laid out for the smallest models: the scratchpad as YAML (empty fields
left out), then, last, where the model looks most, the iteration, the task, the result of the
previous action and one line saying what to do now.

The rules' `## Examples` section holds worked steps (`Task:` / `Last result:` / `Action:`).
`split_examples` renders them as (user, reply) pairs the cycle passes in each `Request`, and the
models' `chat_messages` turns them into real user/assistant turns, each user turn rendered by
`user_prompt` itself, so an example looks exactly like the message the model will answer.
Small models copy such turns far more reliably than examples written inside the system text.

For the embedded model the *grammar* (never the messages, so the prompt cache still hits) is
shaped per step from the task: see agent/models/local/guidance.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from agent.common.outcomes import UsageError
from agent.common.safe_yaml import FileRefused, dump_yaml, read_text_file
from agent.models.base import EXAMPLES_HEADING
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
    """The rules with the tool list filled in, minus examples of tools this home does not offer."""
    rules = _without_examples_of_missing_tools(rules, registry)
    listing = registry.prompt_listing()
    if TOOLS_MARKER in rules:
        return rules.replace(TOOLS_MARKER, listing)
    return f"{rules.rstrip()}\n\n## Tools\n\n{listing}\n"


def _without_examples_of_missing_tools(rules: str, registry: Registry) -> str:
    """Drop example blocks whose action calls a disabled tool: the model would copy them."""
    start = rules.find(f"\n{EXAMPLES_HEADING}\n")
    if start < 0:
        return rules
    body_start = start + len(EXAMPLES_HEADING) + 2
    following = rules.find("\n## ", body_start)
    body = rules[body_start:] if following < 0 else rules[body_start:following]
    kept = []
    for block in body.split("\n\n"):
        named = re.findall(r'"tool":\s*"([^"]+)"|\[TOOL\] (\w+)\(', block)
        if all(name in registry for pair in named for name in pair if name):
            kept.append(block)
    return rules[:body_start] + "\n\n".join(kept) + ("" if following < 0 else rules[following:])


# ------------------------------------------------------------------------------- user message


def last_result(state: dict, iteration: int) -> str:
    """What the previous action of this cycle did: the newest note; "none yet" on the first step."""
    if iteration <= 1:
        return NOTHING_YET
    lines = [line for line in (state.get("notes") or "").splitlines() if line.strip()]
    return lines[-1] if lines else NOTHING_YET


def next_step(state: dict, result: str) -> str:
    """One plain instruction for this step, derived only from the state and the last result."""
    if not state.get("current_task"):
        if state.get("pending_actions"):
            return "There is no current task: call done to start the next pending action."
        return "There is nothing to do: call done."
    if result == NOTHING_YET:
        return "Call the tool that does the task."
    if result.startswith(("[TOOL ERROR]", "[PARSE ERROR]", "[UNKNOWN TOOL]")):
        return "The last action failed: call a tool with fixed arguments, or call done and say why."
    return "If the last result finishes the task, call done. Otherwise call the next tool."


def _compact(state: dict) -> dict:
    return {k: v for k, v in state.items() if v not in (None, "", [], {}) and k != "last_updated"}


def user_prompt(state: dict, iteration: int, max_iterations: int, warnings: list[str] | None = None) -> str:
    """The changing part: the scratchpad as YAML, then where this iteration stands."""
    compact = _compact(state)
    scratchpad = dump_yaml(compact).rstrip() if compact else "(empty)"
    result = last_result(state, iteration)
    lines = [
        "## Scratchpad",
        "",
        scratchpad,
        "",
        f"Iteration {iteration} of {max_iterations}.",
        f"Task: {state.get('current_task') or 'none'}",
        f"Last result: {result}",
    ]
    lines.extend(warnings or [])
    if iteration >= max_iterations:
        lines.append("Now: this is the LAST iteration: call done with a summary of what was done.")
    else:
        lines.append(f"Now: {next_step(state, result)}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------- examples

_EXAMPLE = re.compile(r"^Task: (?P<task>.*)\nLast result: (?P<result>.*)\nAction: (?P<action>\{.*\})$")


def split_examples(system: str) -> tuple[str, list[tuple[str, str]]]:
    """(system text without its examples, [(user turn, assistant reply)]) from the rules' examples.

    A system text with no `## Examples` section, or one whose blocks do not all parse, is
    returned unchanged with no turns: the examples then simply stay where they are.
    """
    start = system.find(f"\n{EXAMPLES_HEADING}\n")
    if start < 0:
        return system, []
    body_start = start + len(EXAMPLES_HEADING) + 2
    following = system.find("\n## ", body_start)
    body = system[body_start:] if following < 0 else system[body_start:following]
    turns = []
    for block in (b.strip() for b in body.split("\n\n")):
        if not block:
            continue
        match = _EXAMPLE.match(block)
        if not match:
            return system, []
        try:
            action = json.loads(match["action"])
        except ValueError:
            return system, []
        task, result = match["task"].strip(), match["result"].strip()
        state = {
            "current_task": None if task == "none" else task,
            "pending_actions": [],
            "notes": "" if result == NOTHING_YET else result,
        }
        iteration = 1 if result == NOTHING_YET else 2
        turns.append((user_prompt(state, iteration, 10), json.dumps(action)))
    rest = system[:start] + ("" if following < 0 else system[following:])
    return rest.rstrip() + "\n", turns


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
    system: str, state: dict, iteration: int, settings: Any, warnings: list[str] | None = None
) -> str:
    """`user_prompt`, clipped so that system + user fit `prompt_max_bytes` (when they can at all)."""
    max_iterations, max_bytes, warnings = settings.max_iterations, settings.prompt_max_bytes, list(warnings or [])
    user = user_prompt(state, iteration, max_iterations, warnings)
    room = max(max_bytes - len(system.encode()), max_bytes // 4)  # a huge system prompt never empties the user's
    full = len(user.encode())
    if full <= room:
        return user
    note = (
        f"Note: the scratchpad is too large for one prompt ({full} bytes; prompt_max_bytes is {max_bytes}): "
        f"long values are shown clipped. Keep notes and tasks short."
    )
    cap = max(SMALLEST_CLIP, room // 4)
    while True:
        user = user_prompt(clip_strings(state, cap), iteration, max_iterations, [*warnings, note])
        if len(user.encode()) <= room or cap <= SMALLEST_CLIP:
            break
        cap //= 2
    if len(user.encode()) <= room:
        return user
    return _cut_block(user, room)


def _cut_block(user: str, room: int) -> str:
    """The user message with the scratchpad block cut to what fits; the closing lines kept whole."""
    at = user.find("\nIteration ")
    head, tail = (user[:at], user[at:]) if at >= 0 else ("", user)
    marker = "\n[... the rest of the scratchpad is cut: it does not fit prompt_max_bytes ...]"
    keep = max(0, room - len(tail.encode()) - len(marker.encode()))
    return head.encode()[:keep].decode("utf-8", errors="ignore") + marker + tail
