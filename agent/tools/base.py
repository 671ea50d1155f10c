"""Tools: each one is a typed Python function with a docstring, defined once.

`Tool.from_function` reads the signature and docstring; from that one definition come the
tool's line in the prompt, its JSON schema (sent to models that take structured output), and
the validation of the arguments a model sends. Two control tools, `update_scratchpad` and
`done`, are handled by the dispatcher; their argument schemas come from the scratchpad fields.

A tool function may take a `ToolContext` as its first argument (named `ctx`, or annotated
`ToolContext`); it is not part of the schema. Plain functions without one work too, which is
what most plugin tools look like.

A tool may also have a `precheck`: the part of its own validation that refuses a call without
doing anything (a shell policy, a path outside the workspace), with the same signature and the
same ToolError. A gated call is parked for the operator only if its precheck passes, so nobody
is asked to approve a call that would be refused anyway.

This module knows no tool implementation: the built-in tools and plugins import it, and
`registry.build_registry` (above them all) assembles what one cycle offers.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from agent.common.jsonschema import check, schema_for, type_name
from agent.common.plain import described
from agent.common.tags import Tag
from agent.config import Settings
from agent.secrets import Secrets
from agent.setting_checks import SectionSpec, edit_schemas
from agent.state import FIELD_SCHEMAS, RUNTIME_FIELDS


class ToolError(Exception):
    """A tool refused or failed; becomes a [TOOL ERROR] note. The message is shown to the model."""


class NeedsApproval(Exception):
    """A gated tool's call was held, not run: the operator decides (agent/gates/approvals.py)."""


@dataclass
class ToolContext:
    """What a tool may know about the cycle it runs in."""

    home: Path
    settings: Settings
    secrets: Secrets | None = None  # None: the settings' secrets, read from the environment
    journal: Any = None  # a cycle's journal of calls with side effects (agent/cycle/journal.py); None: none kept
    ledger: Any = None  # the workspace's count for the quota, made when first needed (agent/tools/quota.py)
    memory: Any = None  # the cycle's sections as update_scratchpad applies them (memory/specs.py Edits); None: no cycle
    origins: Any = None  # where what the model read came from (agent/tools/origins.py Origins); None: not kept

    def __post_init__(self) -> None:
        if self.secrets is None:
            self.secrets = Secrets.from_settings(self.settings)

    @property
    def workspace(self) -> Path:
        """The folder the file tools and the shell are confined to: the `workspace` setting
        inside the home (`.`: the home itself)."""
        home = self.home.resolve()
        root = (home / self.settings.workspace).resolve()
        if not root.is_relative_to(home):
            raise ToolError(f"the workspace '{self.settings.workspace}' resolves to {root}, outside the home")
        return root

    def child_env(self) -> dict[str, str]:
        """The environment for child processes, with secret variables removed."""
        return self.secrets.child_env()

    def run(self, tool: "Tool", args: dict) -> Any:
        """Run `tool` with `args`; a call with side effects is journaled before and after, when a
        journal is kept (agent/cycle/journal.py), so a cycle killed mid-call leaves a trace of it."""
        if self.journal is None or not tool.side_effects:
            return tool.func(self, **args)
        return self.journal.around(tool.name, args, lambda: tool.func(self, **args))


TOOL_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")


def _is_context(param: inspect.Parameter, hints: dict) -> bool:
    return param.name == "ctx" or hints.get(param.name) is ToolContext


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


def _with_context(func: Callable[..., Any], hints: dict) -> tuple[Callable[..., Any], list[inspect.Parameter]]:
    """(`func` called as every tool is, with the context first; the parameters the model fills)."""
    params = list(inspect.signature(func).parameters.values())
    if params and _is_context(params[0], hints):
        return func, params[1:]

    @functools.wraps(func)  # a plain function: give it the same calling convention as the rest
    def with_context(ctx: ToolContext, **kwargs: Any) -> Any:
        return func(**kwargs)

    return with_context, params


def _param_schema(name: str, param: inspect.Parameter, hints: dict, described: dict[str, str]) -> dict:
    """The JSON Schema of one parameter, from its annotation and its line in the docstring's Args."""
    if param.kind not in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
        raise TypeError(f"tool {name}: *args/**kwargs cannot be described to a model")
    if param.name not in hints:
        raise TypeError(f"tool {name}: parameter '{param.name}' needs a type annotation")
    try:
        prop = schema_for(hints[param.name])
    except TypeError as exc:
        raise TypeError(f"tool {name}: parameter '{param.name}': {exc}") from None
    if param.name in described:
        prop["description"] = described[param.name]
    return prop


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    args_schema: dict
    func: Callable[..., Any] | None = None  # None for the dispatcher's control tools
    source: str = "built-in"
    example: dict = field(default_factory=dict)
    precheck: Callable[..., Any] | None = None  # (ctx, **args): raises the ToolError the call would; runs nothing
    # Whether a call may change something outside the cycle's memory (send, write, run): such calls
    # are journaled, and one a killed cycle left unfinished is never repeated on its own.
    side_effects: bool = True
    # Arguments the tool knows but does not offer (update_scratchpad: the read-only sections): the
    # schema leaves them out, and check_args lets them through so the tool refuses them by name.
    unoffered: tuple[str, ...] = ()

    @classmethod
    def from_function(
        cls,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        source: str = "built-in",
        example: dict | None = None,
        precheck: Callable[..., Any] | None = None,
        side_effects: bool = True,
    ) -> "Tool":
        """The tool a typed function with a docstring describes; TypeError says what is missing."""
        if not callable(func) or not hasattr(func, "__name__"):
            raise TypeError(f"a tool must be a function, got {described(func)}")
        name = name or func.__name__
        if not TOOL_NAME.fullmatch(name):
            raise TypeError(f"tool name {name!r} must be letters, digits and underscores, starting with a letter")
        try:
            hints = typing.get_type_hints(func)
        except Exception as exc:  # an annotation that names something undefined
            raise TypeError(f"tool {name}: cannot read its type annotations: {exc}") from None
        summary, param_docs = _parse_docstring(func.__doc__ or "")
        if not summary:
            raise TypeError(f"tool {name} needs a docstring: it is the tool's description")
        func, params = _with_context(func, hints)
        properties = {param.name: _param_schema(name, param, hints, param_docs) for param in params}
        required = [param.name for param in params if param.default is param.empty]
        args_schema = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
        return cls(name, summary, args_schema, func, source, example or {}, precheck, side_effects)

    def check_args(self, args: Any) -> str | None:
        """Why these arguments cannot be passed to the tool, or None when they can."""
        if not isinstance(args, dict):
            return f"args must be a JSON object, got {described(args)}"
        for key in args:
            if key not in self.args_schema["properties"] and key not in self.unoffered:
                allowed = ", ".join(self.args_schema["properties"]) or "none"
                return f"unexpected argument '{key}' (arguments: {allowed})"
        for key in self.args_schema["required"]:
            if key not in args:
                return f"missing required argument '{key}'"
        return check(self.offered_args(args), self.args_schema)

    def offered_args(self, args: dict) -> dict:
        """`args` without the arguments the tool does not offer (`unoffered`)."""
        return {k: v for k, v in args.items() if k not in self.unoffered} if self.unoffered else args

    def refusal(self, ctx: ToolContext, args: dict) -> str | None:
        """Why the tool would refuse these (schema-valid) arguments without running, or None:
        its precheck's ToolError. A precheck that crashes refuses too (fail closed)."""
        if self.precheck is None:
            return None
        try:
            self.precheck(ctx, **args)
        except ToolError as exc:
            return str(exc)
        except Exception as exc:  # a plugin's precheck bug: do not ask the operator about such a call
            return f"its precheck raised {type(exc).__name__}: {exc}"
        return None

    def signature(self) -> str:
        parts = []
        for key, prop in self.args_schema["properties"].items():
            optional = "" if key in self.args_schema["required"] else "?"
            parts.append(f"{key}{optional}: {type_name(prop)}")
        return f"{self.name}({', '.join(parts)})"

    def prompt_line(self) -> str:
        line = f"- {self.signature()}: {self.description}"
        if self.example:
            line += f"\n  example: {json.dumps({'tool': self.name, 'args': self.example})}"
        return line

    def action_schema(self) -> dict:
        """The schema of one reply that calls this tool: {"tool": name, "args": {...}}."""
        return {
            "type": "object",
            "description": self.description,
            "properties": {"tool": {"const": self.name}, "args": self.args_schema},
            "required": ["tool", "args"],
            "additionalProperties": False,
        }


# ------------------------------------------------------------------------------ control tools

CONTROL_TOOLS = ("update_scratchpad", "done")


def control_tools(sections: tuple[SectionSpec, ...] = ()) -> list[Tool]:
    """update_scratchpad and done, in CONTROL_TOOLS order: offered every cycle, run by the
    dispatcher (no function). Built fresh for each registry, so no two share a schema dict.
    update_scratchpad takes the writable fields and, after them, the writable `sections` (each
    one's schema from its spec: setting_checks.edit_schemas)."""
    writable = {k: v for k, v in FIELD_SCHEMAS.items() if k not in RUNTIME_FIELDS}
    writable.update(edit_schemas(sections))
    update_scratchpad = Tool(
        name="update_scratchpad",
        description=(
            "Change scratchpad fields. completed_tasks entries are appended; pending_actions is "
            "replaced; goals, current_task and notes are set to the value given."
            + (" A memory section takes one string: see its description." if sections else "")
        ),
        args_schema={"type": "object", "properties": writable, "required": [], "additionalProperties": False},
        example={"current_task": "Check disk space", "pending_actions": ["Report free space"]},
        unoffered=tuple(spec.name for spec in sections if spec.read_only),  # refused by name, not as unknown
    )
    done = Tool(
        name="done",
        description=(
            "Finish this cycle: the current task moves to completed_tasks with your summary and the "
            "next pending action becomes the current task. Call it exactly once, as the last action."
        ),
        args_schema={
            "type": "object",
            "properties": {"summary": {"type": "string"}},
            "required": ["summary"],
            "additionalProperties": False,
        },
        example={"summary": "Checked the date and noted it"},
    )
    return [update_scratchpad, done]


# ----------------------------------------------------------------------------------- registry


# Said with every unknown tool: where more tools come from (a tool msa's rules name, say yolo_detect).
WHERE_TOOLS_COME_FROM = (
    "more tools come from plugins (the agent.tools entry point) and MCP servers (mcp_servers in config.yaml); "
    "`agent tools` lists what a cycle offers"
)


class NotACall(Exception):
    """Why a reply is not a call of an offered tool with valid arguments: the note's tag and text
    (`unparsed`: the reply is no JSON action at all), and what it named, if anything."""

    def __init__(self, tag: Tag, problem: str, name: Any = None, args: Any = None, unparsed: bool = False):
        super().__init__(problem)
        self.tag, self.problem, self.name, self.call_args, self.unparsed = tag, problem, name, args, unparsed

    @property
    def noted(self) -> str:
        """The problem as the dispatcher's note says it (bad arguments: after the tool's name)."""
        return f"{self.name}: {self.problem}" if self.tag is Tag.TOOL_ERROR else self.problem


class Registry:
    """The tools offered in one cycle, in the order the prompt lists them.

    `disabled` names the tools config turned off; `problems` says which plugins were skipped.
    """

    def __init__(self, tools: list[Tool], disabled: list[str] | None = None, problems: list[str] | None = None):
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise ValueError(f"two tools are named '{tool.name}'")
            self._tools[tool.name] = tool
        self.disabled = list(disabled or [])
        self.problems = list(problems or [])
        self.later_problems: Callable[[], list[str]] = list  # what went wrong since (MCP servers' noise), for the log

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def names(self) -> list[str]:
        return list(self._tools)

    def called(self, reply: Any, max_reply_bytes: int | None = None, prepare: Callable | None = None) -> tuple:
        """(tool name, arguments, the arguments as checked) of a reply that calls one of these tools
        with valid arguments; else NotACall, saying why as the dispatcher notes it. The one check of a
        reply: the loop's dispatcher and every one-off call (reflect, agent/memory/one_call.py) make
        it. `prepare(tool, args)` -> (args, args to check, refusal): what a caller lets through
        before the schema (the dispatcher: msa's prompts' done without a summary)."""
        from agent.models.replies import ReplyError, clip_line, parse_reply

        try:
            action = parse_reply(reply, max_reply_bytes)  # the text, or the first native call
        except ReplyError as exc:
            raise NotACall(Tag.PARSE_ERROR, str(exc), unparsed=True) from None
        name, args = action["tool"], action.get("args", {})
        if not isinstance(name, str):
            raise NotACall(Tag.PARSE_ERROR, f'"tool" must be a string, got {described(name)}')
        if name not in self:
            listed = ", ".join(self.names())
            raise NotACall(
                Tag.UNKNOWN_TOOL, f"{clip_line(name, 60)} (tools: {listed}; {WHERE_TOOLS_COME_FROM})", name, args
            )
        args = {} if args is None else args
        args, checked, problem = prepare(self[name], args) if prepare else (args, args, None)
        problem = problem or self[name].check_args(checked)
        if problem:
            raise NotACall(Tag.TOOL_ERROR, problem, name, args)
        return name, args, checked

    def prompt_listing(self) -> str:
        return "\n".join(tool.prompt_line() for tool in self)

    def action_schema(self) -> dict:
        """One reply: any one tool with that tool's arguments."""
        return {"anyOf": [tool.action_schema() for tool in self]}
