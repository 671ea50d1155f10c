"""Guidance for a small model (`guided`): the schema it is offered, never the messages, is
narrowed per step, and nothing else about the cycle changes.

A 135M model picks the wrong tool and makes up what it was asked to report. So for each step the action schema
it must follow is narrowed from the structured step (`Request.task`, `Request.previous`):
`focused_tools` offers only the tools whose own definitions share the most words with the task
(and `done` once something was done), `arguments_from_task` has a first step's `path` and
`content` arguments come out of the task's own words, and `summary_from_result` has `done`'s
summary start with a value the last tool returned. `without_queue` keeps `pending_actions` out of update_scratchpad in every step:
such a model copies the next queued task's words into this one and would replace the queue
with them, so the queue stays the operator's and `done`'s. The messages stay byte-identical, so
the prompt cache still hits; the provider returns the schema it offered (`Completion.schema`)
and the dispatcher refuses a call outside it.
"""

from __future__ import annotations

import math
import re

from agent.common.tags import Outcome, Tag
from agent.models.base import Request

# Each narrowing here stays only while it raises the held-out tasks of bench/local_tasks.py
# (`--tasks held-out`). A stopword list, suffix stemming, command lines taken from the task
# (after "command", or in backquotes), a list of asking words gating the summary, a list of
# folder words and paths limited to the task's words did not (issue 24), so they went. Paths and
# contents from the task together did (issue 37: 4/10 to 6/10; contents alone 6/10, paths alone
# 4/10, and the tuned tasks 9/12, 9/12, 10/12 and 11/12 with both), so they came back as one.


def words(text: str) -> set[str]:
    """The words of a text, lower-cased (`list_dir` gives list, dir)."""
    found = re.findall(r"[a-z0-9]+(?:-[a-z0-9]+)*", text.lower().replace("_", " "))
    return {w for w in found if len(w) > 1}


def _tool_name(option: dict) -> str:
    return option["properties"]["tool"]["const"]


def _option_text(option: dict) -> str:
    """What an action-schema option says about its tool: name, description, argument names and docs."""
    name = _tool_name(option)
    args = option["properties"]["args"].get("properties", {})
    parts = [name, name, option.get("description", "")]  # the name counts twice
    for key, prop in args.items():
        parts += [key, str(prop.get("description", ""))]
    return " ".join(parts)


def rank_tools(task: str, action_schema: dict) -> list[tuple[str, float]]:
    """Tools ranked by how much the task's words overlap each tool's own definition, best first.

    A shared word counts more the fewer tools mention it (inverse document frequency), so a word
    every tool uses ("the", "file" for the file tools) decides little. The control tool `done`
    is left out: it is always a valid answer. Ties keep registry order.
    """
    options = [o for o in action_schema.get("anyOf", []) if _tool_name(o) != "done"]
    docs = {_tool_name(o): words(_option_text(o)) for o in options}
    wanted = words(task)
    n = len(docs)
    scores = []
    for name, doc in docs.items():
        score = 0.0
        for word in wanted & doc:
            df = sum(word in d for d in docs.values())
            score += math.log((n + 1) / df)
        scores.append((name, score))
    return sorted(scores, key=lambda pair: -pair[1])


def focused_tools(task: str | None, previous: Outcome | None, action_schema: dict, keep: int = 2) -> list[str] | None:
    """The tools worth offering a small model for one step of `task`.

    None (every tool stays on offer) when there is no task or the task shares no word with
    any tool. Otherwise the best `keep` tools, each scoring at least half the best score, and
    `done`, except on the first step (no `previous` outcome): nothing has been done yet, so the
    task cannot be finished yet either.
    """
    if not task or keep <= 0:
        return None
    ranked = rank_tools(task, action_schema)
    if not ranked or ranked[0][1] <= 0:
        return None
    best = ranked[0][1]
    names = [name for name, score in ranked[:keep] if score >= best / 2]
    return names if previous is None else names + ["done"]


def restrict_schema(action_schema: dict, names: list[str] | None) -> dict:
    """The action schema with only the named tools (in the schema's order); unchanged for None."""
    if names is None:
        return action_schema
    kept = [o for o in action_schema["anyOf"] if _tool_name(o) in names]
    return {**action_schema, "anyOf": kept} if kept else action_schema


def _narrowed(action_schema: dict, arg: str, narrowing: dict, tool: str | None = None) -> dict:
    """The action schema with `narrowing` added to argument `arg` of every tool that has one (or of `tool`)."""
    options = []
    for option in action_schema["anyOf"]:
        args = option["properties"]["args"]
        if arg in args.get("properties", {}) and tool in (None, _tool_name(option)):
            narrowed = {key: value for key, value in args["properties"][arg].items() if key != "maxLength"}
            args = {**args, "properties": {**args["properties"], arg: {**narrowed, **narrowing}}}
            option = {**option, "properties": {**option["properties"], "args": args}}
        options.append(option)
    return {**action_schema, "anyOf": options}


def grammar_safe(value: str) -> bool:
    """Whether a value taken from a task may become a literal in a grammar: llama.cpp's converter
    leaves a backslash unescaped, and its C++ parser crashes the process on what results (a
    segfault: not even a failed cycle is saved), so quotes, backslashes and control characters
    are never offered."""
    return bool(value) and not re.search(r'["\\\x00-\x1f\x7f]', value)


def task_words(task: str) -> list[str]:
    """The task's words as written (case kept), without surrounding quotes or punctuation."""
    found = [raw.strip("'\"`()[]{}<>,;:!?").rstrip(".") for raw in task.split()]
    return [word for word in found if word]


def task_paths(task: str) -> list[str]:
    """What a `path` may be on a task's first step: a word of the task that names a file (has an
    extension or a slash), or, if none does, any of its words; and "." (the workspace)."""
    found = [word for word in task_words(task) if grammar_safe(word)]
    named = [word for word in found if re.search(r"\w\.[A-Za-z]\w*$", word) or "/" in word]
    chosen = list(dict.fromkeys(named or found))
    return chosen + (["."] if "." not in chosen else [])


MAX_SPAN_WORDS = 6
MAX_SPAN_START = 40  # runs start within the task's first 40 words: the grammar stays a few hundred choices


def task_spans(task: str) -> list[str]:
    """What a `content` may be on a task's first step: a run of up to MAX_SPAN_WORDS of the task's
    words, as written ("hello world" in "Write hello world into greeting.txt")."""
    found = task_words(task)[: MAX_SPAN_START + MAX_SPAN_WORDS - 1]
    spans = []
    for start in range(min(len(found), MAX_SPAN_START)):
        for end in range(start + 1, min(len(found), start + MAX_SPAN_WORDS) + 1):
            span = " ".join(found[start:end])
            if grammar_safe(span):
                spans.append(span)
    return list(dict.fromkeys(spans))


def arguments_from_task(task: str | None, previous: Outcome | None, action_schema: dict) -> dict:
    """On a task's first step (nothing found yet), `path` and `content` arguments must come out of
    the task's own words. The 135M model listed the folder "inbox.txt" for the folder inbox and
    wrote "Hello, World!" when told to write hello world."""
    if not task or previous is not None:
        return action_schema
    schema = _narrowed(action_schema, "path", {"enum": task_paths(task)})
    spans = task_spans(task)
    return _narrowed(schema, "content", {"enum": spans}) if spans else schema


_SIZE = re.compile(r"\s*\(\d[\d,]* bytes\)$")
# What a summary may say after the value it starts with: no quote, backslash or control character
# (the grammar builds the string from this class; JSON escapes are not part of it).
_SUMMARY_TAIL = r"[ a-zA-Z0-9.,:=/'_%#@!?-]{0,60}"
# A value is offered only when it is made of these, each written as itself in a grammar pattern
# (a "." as "[.]": llama.cpp's pattern converter takes "\\." for an unknown escape).
_VALUE = re.compile(r"[ a-zA-Z0-9._,:/@#%=-]+")


def result_values(previous: Outcome | None, task: str = "") -> list[str]:
    """The values a tool result lists ("a; b; key = value"): each item and each item's value. When
    some items share a word with the task ("the port" and "port = 5433"), only those."""
    if previous is None or previous.kind is not Tag.TOOL or not previous.result:
        return []
    items = [_SIZE.sub("", item.strip()) for item in previous.result.split(";")]
    items = [item for item in items if item and len(item) <= 80 and _VALUE.fullmatch(item)]
    items = [item for item in items if words(item) & words(task)] or items
    values = []
    for item in items:
        values.append(item)
        for separator in ("=", ":"):
            if separator in item and item.partition(separator)[2].strip():
                values.append(item.partition(separator)[2].strip())
    return list(dict.fromkeys(values))


def _pattern_literal(text: str) -> str:
    return text.replace(".", "[.]")


def summary_from_result(task: str | None, previous: Outcome | None, action_schema: dict) -> dict:
    """When the last step's tool returned values, `done`'s summary must start with one of them.
    The 135M model read "port = 5433" and summed up "The server is not available"; it can pick a
    value far better than it can copy one."""
    values = result_values(previous, task or "")
    if not values:
        return action_schema
    pattern = "^(" + "|".join(_pattern_literal(v) for v in values) + ")" + _SUMMARY_TAIL + "$"
    return _narrowed(action_schema, "summary", {"pattern": pattern}, tool="done")


QUEUE_FIELD = "pending_actions"


def without_queue(action_schema: dict) -> dict:
    """The action schema with `pending_actions` left out of update_scratchpad's arguments (the
    same in every step, so a tool list sent with every request stays byte-stable)."""
    options = []
    for option in action_schema.get("anyOf", []):
        args = option["properties"]["args"]
        if _tool_name(option) == "update_scratchpad" and QUEUE_FIELD in args.get("properties", {}):
            kept = {key: value for key, value in args["properties"].items() if key != QUEUE_FIELD}
            args = {**args, "properties": kept, "required": [k for k in args.get("required", []) if k != QUEUE_FIELD]}
            option = {**option, "properties": {**option["properties"], "args": args}}
        options.append(option)
    return {**action_schema, "anyOf": options}


def guided_schema(request: Request) -> dict:
    """The action schema narrowed for this step: no pending_actions, the relevant tools only, a
    first step's paths and contents from the task's words, and a summary that starts with a value
    the last step found."""
    schema = without_queue(request.schema)
    schema = restrict_schema(schema, focused_tools(request.task, request.previous, schema))
    schema = arguments_from_task(request.task, request.previous, schema)
    return summary_from_result(request.task, request.previous, schema)
