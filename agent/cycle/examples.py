"""The worked examples the model sees before each step of its own: data, never prose parsed back.

They live in the packaged templates/examples.yaml, or in the home's own examples.yaml, which replaces
it (as a home's rules.md replaces the packaged rules). Each example is a task, the result of the
previous action (an Outcome's note and the tool it called; left out on a first step) and the
action to reply with. `turns` renders each as a (user message, reply) pair, the user message by
`prompt.user_prompt` itself, so an example looks exactly like the message the model will answer;
`section` renders the same examples as system text, for a model sent no turns. An example whose
action or last result names a tool the home does not offer is left out: the model would copy it.
Both come out the same for every step and every cycle of a home, so prompt caches hit.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from agent.common.jsonschema import check
from agent.common.outcomes import UsageError
from agent.common.safe_yaml import FileRefused, load_yaml, read_text_file, yaml_problem
from agent.common.tags import Outcome, Tag
from agent.cycle.prompt import NOTHING_YET, Preamble, user_prompt
from agent.tools import Registry

# An examples file past this size is a mistake: every example is sent with every request.
MAX_EXAMPLES_BYTES = 256 * 1024
# The iteration cap an example's user message shows (the real cap is the home's own).
SHOWN_MAX_ITERATIONS = 10

SCHEMA = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "task": {"type": ["string", "null"]},
            "last_result": {
                "type": "object",
                "properties": {"tool": {"type": "string"}, "note": {"type": "string"}},
                "required": ["tool", "note"],
                "additionalProperties": False,
            },
            "action": {
                "type": "object",
                "properties": {"tool": {"type": "string"}, "args": {"type": "object"}},
                "required": ["tool", "args"],
                "additionalProperties": False,
            },
        },
        "required": ["task", "action"],
        "additionalProperties": False,
    },
}


def default_examples() -> str:
    """The packaged examples (through pkgutil: importlib.resources would bring tempfile and shutil into
    every cycle, which NOT_IMPORTED_BY_A_PLAIN_CYCLE in tests/cli/test_run.py keeps out)."""
    import pkgutil

    return (pkgutil.get_data("agent", "templates/examples.yaml") or b"").decode("utf-8")


def read_examples(path: Path) -> list[dict]:
    """The home's examples.yaml, or the packaged examples when the home has none. A file that
    cannot be read, is not YAML or is not a list of examples is a configuration error
    (UsageError, exit 2, as for a bad rules.md), with what is wrong and where."""
    try:
        text = read_text_file(path, "examples file", MAX_EXAMPLES_BYTES)
    except FileRefused as exc:
        raise UsageError(str(exc)) from exc
    return packaged_examples() if text is None else parse_examples(text, path)


def packaged_examples() -> list[dict]:
    return parse_examples(default_examples(), "agent/templates/examples.yaml")


def parse_examples(text: str, where: object) -> list[dict]:
    """The examples in `text` (from `where`), checked; UsageError saying what is wrong and where."""
    try:
        examples = load_yaml(text)
    except yaml.YAMLError as exc:
        raise UsageError(f"{where}: {yaml_problem(exc)}") from exc
    problem = check(examples, SCHEMA, "examples") or _note_problem(examples)
    if problem:
        raise UsageError(f"{where}: {problem} (each example: task, last_result {{tool, note}}, action {{tool, args}})")
    return examples


def _note_problem(examples: list[dict]) -> str | None:
    """Why a last result's note is not an outcome's note line, or None."""
    for n, example in enumerate(examples):
        note = example.get("last_result", {}).get("note")
        if note is not None and (previous(example) is None or "\n" in note):
            return f"'examples[{n}].last_result.note' must be one note line that starts with a tag such as [TOOL]"
    return None


def previous(example: dict) -> Outcome | None:
    """The outcome an example's step follows: its last result; None on a first step (or an untagged note)."""
    last = example.get("last_result")
    if last is None:
        return None
    tag, _ = Tag.of(last["note"])
    return None if tag is None or tag.action is None else Outcome(tag, last["note"], last["tool"])


def offered(examples: list[dict], registry: Registry) -> list[dict]:
    """The examples whose action and last result name only tools `registry` offers."""
    return [example for example in examples if all(tool in registry for tool in _tools(example))]


def _tools(example: dict) -> list[str]:
    last = example.get("last_result")
    return [example["action"]["tool"], *([] if last is None else [last["tool"]])]


def turns(examples: list[dict]) -> tuple[tuple[str, str], ...]:
    """Each example as (the user message of its step, the reply): chat turns for `Request.examples`."""
    return tuple((_user_message(example), json.dumps(example["action"])) for example in examples)


def _user_message(example: dict) -> str:
    before = previous(example)  # shown once, as the step's "Last result", as in the cycle's own prompts
    state = {"current_task": example["task"], "pending_actions": [], "notes": ""}
    return user_prompt(state, 1 if before is None else 2, SHOWN_MAX_ITERATIONS, previous=before)


def section(examples: list[dict]) -> str:
    """The examples as a section of system text, for a model sent no turns (`Request.examples_text`)."""
    if not examples:
        return ""
    blocks = [
        f"Task: {example['task'] or 'none'}\n"
        f"Last result: {example['last_result']['note'] if 'last_result' in example else NOTHING_YET}\n"
        f"Action: {json.dumps(example['action'])}"
        for example in examples
    ]
    return "## Examples\n\n" + "\n\n".join(blocks) + "\n"


def preamble(system: str, examples: list[dict]) -> Preamble:
    """The preamble of a cycle's requests: the system message and these examples, in both forms."""
    return Preamble(system, turns(examples), section(examples))
