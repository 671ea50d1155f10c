"""Tools: each one is a typed Python function with a docstring, defined once.

`Tool.from_function` reads the signature and docstring; from that one definition come the
tool's line in the prompt, its JSON schema (sent to models that take structured output), and
the validation of the arguments a model sends. Two control tools, `update_scratchpad` and
`done`, are handled by the dispatcher; their argument schemas come from the scratchpad schema.

Every tool function takes a `ToolContext` as its first argument; it is not part of the schema.
"""

from __future__ import annotations

import inspect
import os
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from . import schema

if typing.TYPE_CHECKING:
    from .config import Settings


class ToolError(Exception):
    """A tool refused or failed; becomes a [TOOL ERROR] note. The message is shown to the model."""


@dataclass
class ToolContext:
    """What a tool may know about the cycle it runs in."""

    home: Path
    settings: "Settings"
    secret_values: tuple[str, ...] = ()

    @property
    def workspace(self) -> Path:
        """Where file tools may reach: the home, or the configured folder inside it."""
        root = self.home.resolve()
        if self.settings.workspace:
            root = (root / self.settings.workspace).resolve()
        return root

    def child_env(self) -> dict[str, str]:
        """The environment for child processes, with secret variables removed."""
        hidden = set(self.settings.secret_env) | {self.settings.api_key_env, "OPENAI_API_KEY"}
        return {k: v for k, v in os.environ.items() if k not in hidden and v not in self.secret_values}


_PY_TO_JSON = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _json_schema_for(annotation: Any) -> dict:
    """JSON Schema for a parameter annotation: str, int, float, bool, list[X], X | None."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        inner = _json_schema_for(members[0]) if len(members) == 1 else {"anyOf": [_json_schema_for(m) for m in members]}
        if len(typing.get_args(annotation)) > len(members):
            if "type" in inner and isinstance(inner["type"], str):
                return {**inner, "type": [inner["type"], "null"]}
            return {"anyOf": [inner, {"type": "null"}]}
        return inner
    if origin is list:
        (item,) = typing.get_args(annotation) or (str,)
        return {"type": "array", "items": _json_schema_for(item)}
    if annotation in _PY_TO_JSON:
        return {"type": _PY_TO_JSON[annotation]}
    raise TypeError(f"unsupported parameter type {annotation!r}; use str, int, float, bool, list[...] or X | None")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """(summary, {param: description}) from a docstring with an optional `Args:` section."""
    doc = inspect.cleandoc(doc or "")
    summary, _, rest = doc.partition("\nArgs:")
    described = {}
    for line in rest.splitlines():
        match = re.match(r"\s*(\w+)\s*:\s*(.+)", line)
        if match:
            described[match.group(1)] = match.group(2).strip()
    return " ".join(summary.split()), described


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    args_schema: dict
    func: Callable[..., Any] | None = None  # None for the dispatcher's control tools
    source: str = "built-in"
    example: dict = field(default_factory=dict)

    @classmethod
    def from_function(cls, func: Callable[..., Any], *, name: str | None = None, source: str = "built-in",
                      example: dict | None = None) -> "Tool":
        hints = typing.get_type_hints(func)
        summary, described = _parse_docstring(func.__doc__ or "")
        if not summary:
            raise TypeError(f"tool {func.__name__} needs a docstring: it is the tool's description")
        params = list(inspect.signature(func).parameters.values())[1:]  # the first is the ToolContext
        properties, required = {}, []
        for param in params:
            if param.kind not in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
                raise TypeError(f"tool {func.__name__}: *args/**kwargs cannot be described to a model")
            if param.name not in hints:
                raise TypeError(f"tool {func.__name__}: parameter '{param.name}' needs a type annotation")
            prop = _json_schema_for(hints[param.name])
            if param.name in described:
                prop["description"] = described[param.name]
            properties[param.name] = prop
            if param.default is param.empty:
                required.append(param.name)
        args_schema = {"type": "object", "properties": properties, "required": required,
                       "additionalProperties": False}
        return cls(name or func.__name__, summary, args_schema, func, source, example or {})

    def check_args(self, args: Any) -> str | None:
        """Why these arguments cannot be passed to the tool, or None when they can."""
        if not isinstance(args, dict):
            return f"args must be a JSON object, got {schema.describe(args)}"
        for key in args:
            if key not in self.args_schema["properties"]:
                allowed = ", ".join(self.args_schema["properties"]) or "none"
                return f"unexpected argument '{key}' (arguments: {allowed})"
        for key in self.args_schema["required"]:
            if key not in args:
                return f"missing required argument '{key}'"
        return schema.check(args, self.args_schema, "args")

    def signature(self) -> str:
        parts = []
        for key, prop in self.args_schema["properties"].items():
            optional = "" if key in self.args_schema["required"] else "?"
            parts.append(f"{key}{optional}: {schema.type_name(prop)}")
        return f"{self.name}({', '.join(parts)})"

    def prompt_line(self) -> str:
        import json

        line = f"- {self.signature()}: {self.description}"
        if self.example:
            line += f"\n  example: {json.dumps({'tool': self.name, 'args': self.example})}"
        return line

    def action_schema(self) -> dict:
        """The schema of one reply that calls this tool: {"tool": name, "args": {...}}."""
        return {
            "type": "object",
            "properties": {"tool": {"const": self.name}, "args": self.args_schema},
            "required": ["tool", "args"],
            "additionalProperties": False,
        }


def _update_scratchpad_tool() -> Tool:
    writable = {k: v for k, v in schema.FIELD_SCHEMAS.items() if k not in schema.RUNTIME_FIELDS}
    return Tool(
        name="update_scratchpad",
        description=(
            "Change scratchpad fields. completed_tasks entries are appended; pending_actions is "
            "replaced; goals, current_task and notes are set to the value given."
        ),
        args_schema={"type": "object", "properties": writable, "required": [], "additionalProperties": False},
        example={"current_task": "Check disk space", "pending_actions": ["Report free space"]},
    )


def _done_tool() -> Tool:
    return Tool(
        name="done",
        description=(
            "Finish this cycle: the current task moves to completed_tasks with your summary and the "
            "next pending action becomes the current task. Call it exactly once, as the last action."
        ),
        args_schema={"type": "object", "properties": {"summary": {"type": "string"}},
                     "required": ["summary"], "additionalProperties": False},
        example={"summary": "Checked the date and noted it"},
    )


CONTROL_TOOLS = ("update_scratchpad", "done")


class Registry:
    """The tools offered in one cycle, in the order the prompt lists them."""

    def __init__(self, tools: list[Tool]):
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise ValueError(f"two tools are named '{tool.name}'")
            self._tools[tool.name] = tool

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def __iter__(self):
        return iter(self._tools.values())

    def names(self) -> list[str]:
        return list(self._tools)

    def prompt_listing(self) -> str:
        return "\n".join(tool.prompt_line() for tool in self)

    def action_schema(self) -> dict:
        """One reply: any one tool with that tool's arguments."""
        return {"anyOf": [tool.action_schema() for tool in self]}


def build_registry(settings: "Settings") -> Registry:
    """Built-in tools, minus those disabled in config (and shell when its policy is off)."""
    from . import builtin_tools

    disabled = set(settings.tools_disabled)
    if settings.shell_policy == "off":
        disabled.add("shell")
    tools = [t for t in builtin_tools.TOOLS if t.name not in disabled]
    tools += [_update_scratchpad_tool(), _done_tool()]
    return Registry(tools)
