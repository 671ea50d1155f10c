"""Native tool calls for an OpenAI-compatible endpoint: the `tools` a request sends, the `tool_calls`
a reply brings back, and how an endpoint says it takes no tools.

The function definitions are derived from the action schema the registry builds (one option per
tool: its name, its description, its argument schema), so built-ins, plugins, MCP tools, `done`
and `update_scratchpad` all become functions from the one definition each already has. The list
is built once per cycle and sent byte-identical in every request of it (prompt caches hit).
"""

from __future__ import annotations

import json
import re
from typing import Any

from agent.models.base import ToolCall
from agent.models.openai.format_ladder import error_text

# Sent with every native request: "auto" is OpenAI's default when tools are present, and the one
# value llama-cpp-python's chatml-function-calling format takes besides a named tool ("required"
# fails an assertion there: HTTP 500). Without it, that server ignores the tools altogether.
TOOL_CHOICE = "auto"

# The most calls of one reply that are run: a reply is untrusted, and each call may run a tool.
MAX_CALLS_PER_REPLY = 16

# An assistant message that only calls has content "" (llama-cpp-python refuses null there).
# Where a rules example's call is answered in native mode: OpenAI refuses an assistant message with
# tool_calls that no tool message follows, and an example's result is not part of the example.
EXAMPLE_RESULT = "(an example: no result)"

EARLIER_RESULT = "(its result is in the scratchpad's notes)"

# "tools" or "tool_choice" as a word (a field name, "does not support tools"), not inside another
# name: a refused *message* (llama-cpp-python's ChatCompletionRequestToolMessage) is not a refused tool list.
_NAMES_TOOLS = re.compile(r"\btools?\b|\btool_choice\b|\bfunction[ _-]?call")

_STRICT_KEYS = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "anyOf",
    "enum",
    "const",
    "description",
}


def strict_allowed(schema: Any) -> bool:
    """Whether OpenAI's strict mode can express `schema` exactly: every object closed with all its
    properties required, and only the keywords strict mode takes. A tool with an optional argument
    (list_dir's path) or free-form values (update_scratchpad's completed_tasks) is sent non-strict."""
    if isinstance(schema, list):
        return all(strict_allowed(item) for item in schema)
    if not isinstance(schema, dict) or not set(schema) <= _STRICT_KEYS:
        return False
    types = schema.get("type") if isinstance(schema.get("type"), list) else [schema.get("type")]
    if "object" in types:
        properties = schema.get("properties")
        if (
            not isinstance(properties, dict)
            or schema.get("additionalProperties") is not False
            or sorted(schema.get("required") or []) != sorted(properties)
        ):
            return False
        if not all(strict_allowed(p) for p in properties.values()):
            return False
    if "array" in types and not strict_allowed(schema.get("items")):
        return False
    return "anyOf" not in schema or strict_allowed(schema["anyOf"])


def function_tools(action_schema: dict, strict: bool = True) -> list[dict]:
    """The request's `tools`: one function per option of the action schema, in the registry's order."""
    tools = []
    for option in action_schema["anyOf"]:
        parameters = option["properties"]["args"]
        function = {
            "name": option["properties"]["tool"]["const"],
            "description": option.get("description", ""),
            "parameters": parameters,
        }
        if strict and strict_allowed(parameters):
            function["strict"] = True
        tools.append({"type": "function", "function": function})
    return tools


def calls_of(message: Any) -> tuple[list[ToolCall], int]:
    """The function calls in a reply's message, in order, at most MAX_CALLS_PER_REPLY, and how many
    more were left out (a server's odd shapes kept as they are for the dispatcher to report: a
    missing name stays None, arguments stay as sent)."""
    raw = getattr(message, "tool_calls", None)
    if not isinstance(raw, list):
        return [], 0
    calls = []
    for n, item in enumerate(raw[:MAX_CALLS_PER_REPLY]):
        function = getattr(item, "function", None)
        if function is None:
            continue
        call_id = getattr(item, "id", None)
        calls.append(
            ToolCall(
                call_id if isinstance(call_id, str) and call_id else f"call_{n}",
                getattr(function, "name", None),
                getattr(function, "arguments", None),
            )
        )
    return calls, max(0, len(raw) - MAX_CALLS_PER_REPLY)


def native_messages(messages: list[dict]) -> list[dict]:
    """The messages for a native request: each example's assistant reply, a JSON action as text,
    becomes the call it stands for (answered by a tool message), so the model is shown calls, not
    text to copy. Messages that are not example actions are left as they are."""
    out: list[dict] = []
    for n, message in enumerate(messages):
        action = _example_action(message) if n < len(messages) - 1 else None
        if action is None:
            out.append(message)
            continue
        call = ToolCall(f"example_{len(out)}", action["tool"], json.dumps(action["args"], ensure_ascii=False))
        out += [
            {"role": "assistant", "content": "", "tool_calls": [call.as_sent()]},
            {"role": "tool", "tool_call_id": call.id, "content": EXAMPLE_RESULT},
        ]
    return out


def with_previous(
    messages: list[dict], previous: tuple[str, list[ToolCall]] | None, last_result: str | None
) -> list[dict]:
    """`tool_results: messages`: the previous step as the chat API shows it, before this step's user
    message: its user message, the assistant's calls, and a tool message for each (the last call's
    result is the request's last result; an earlier one's is in the scratchpad's notes). One step
    back only, so a request does not grow with the cycle."""
    if previous is None:
        return messages
    user, calls = previous
    shown = [
        {"role": "user", "content": user},
        {"role": "assistant", "content": "", "tool_calls": [c.as_sent() for c in calls]},
    ]
    for n, call in enumerate(calls):
        result = last_result if n == len(calls) - 1 and last_result else EARLIER_RESULT
        shown.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return messages[:-1] + shown + messages[-1:]


def _example_action(message: dict) -> dict | None:
    if message.get("role") != "assistant" or not isinstance(message.get("content"), str):
        return None
    try:
        action = json.loads(message["content"])
    except ValueError:
        return None
    if isinstance(action, dict) and isinstance(action.get("tool"), str) and isinstance(action.get("args"), dict):
        return action
    return None


def rejects_tools(exc: Exception) -> bool:
    """Whether an HTTP error is the endpoint refusing `tools` (not any error): OpenAI-style servers
    answer 400 naming tools/tool_choice/functions ("does not support tools", Ollama); FastAPI
    servers 422 with the field in `loc`; a few 500 or 501."""
    if getattr(exc, "status_code", None) not in (400, 404, 415, 422, 500, 501):
        return False
    return bool(_NAMES_TOOLS.search(error_text(exc)))


def names_strict(exc: Exception) -> bool:
    """Whether the refusal is of `strict` in a function definition (the tools themselves may be fine)."""
    return "strict" in f"{exc} {getattr(exc, 'body', '')}".lower()
