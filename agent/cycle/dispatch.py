"""The dispatcher: one raw model reply in, the new state and what happened out.

It never raises. Whatever the model sends, the state that comes back is schema-valid and a
tagged line in `notes` says what happened:

    [TOOL] name(args) -> result        a registered tool ran
    [UPDATE] fields                    update_scratchpad was applied
    [COMPLETED] summary                done: the task queue advanced, the cycle ends
    [PARSE ERROR] why                  not JSON, not an object, no "tool"
    [UNKNOWN TOOL] name                no such tool in this cycle
    [TOOL ERROR] name: why             bad arguments, a refusal, or the tool raised
    [CHECK FAILED] why                 done refused: the task's acceptance check failed
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from typing import Any

import agent.memory.task_checks as checks
from agent.common.escape import escape_controls
from agent.common.jsonschema import check
from agent.common.tags import Outcome, Tag
from agent.gates.base import NO_GATES, Action, Gate
from agent.models.replies import clip_line as _clip
from agent.state import (
    FIELD_SCHEMAS,
    FIELDS,
    RUNTIME_FIELDS,
    RUNTIME_KEYS,
    add_note,
    field_problem,
    field_size_problem,
    problems,
)
from agent.tools import NeedsApproval, NotACall, Registry, ToolContext, ToolError


def apply_update(state: dict, args: dict, own_keys: bool = False) -> tuple[dict, str | None]:
    """update_scratchpad: (new state, None), or (state unchanged, why it was refused).

    completed_tasks is extended (never shrunk), pending_actions replaced, other fields set: the
    same for every model. The update is all or nothing: one bad or oversized field refuses the
    whole call. `own_keys` (the model_keys setting): a top-level key of the model's own is kept
    too, as msa kept it, within the size limit of one field.
    """
    refusal = _update_problem(args, own_keys) or _too_many_keys(state, args)
    if refusal:
        return state, refusal
    new = copy.deepcopy(state)
    for key, value in args.items():
        if key == "completed_tasks":
            new["completed_tasks"].extend(copy.deepcopy(value))
        else:
            new[key] = copy.deepcopy(value)
    return new, None


# Most top-level keys besides the scratchpad's fields and the runtime's (memory sections count too) that
# the model's own keys may take a state to: msa's models keep a few (status: ...); without a bound, every
# call could add thousands, each listed by `show` and in every prompt until the state's size limit.
MAX_OWN_KEYS = 100


def _too_many_keys(state: dict, args: dict) -> str | None:
    """Why the new keys of the model's own in `args` would be too many (None: they fit, or there are none)."""
    new = [key for key in args if key not in FIELD_SCHEMAS and key not in state]
    if not new:
        return None
    held = sum(1 for key in state if key not in FIELDS and key not in RUNTIME_KEYS)
    if held + len(new) <= MAX_OWN_KEYS:
        return None
    return (
        f"{len(new)} new key(s) would make {held + len(new)} keys of the model's own, over {MAX_OWN_KEYS}: "
        "set one it has instead"
    )


# What the runtime keeps in logs/agent.db and never takes from a reply, even as a key of the model's
# own (model_keys): an entry's provenance (agent/store/provenance.py).
KEPT_BY_THE_RUNTIME = ("provenance",)


def _update_problem(args: dict, own_keys: bool = False) -> str | None:
    """Why update_scratchpad may not write `args` (a runtime or unknown field, a bad or oversized value)."""
    for key, value in args.items():
        if key in RUNTIME_FIELDS or key in RUNTIME_KEYS:
            return f"field '{key}' is set by the runtime, not by the model"
        if key in KEPT_BY_THE_RUNTIME:
            return f"field '{key}' is kept by the runtime (logs/agent.db), never written by the model"
        if key not in FIELD_SCHEMAS:
            if own_keys:
                problem = _own_key_problem(key, value)
                if problem:
                    return problem
                continue
            fields = ", ".join(k for k in FIELDS if k not in RUNTIME_FIELDS)
            return f"unknown field '{key}' (fields: {fields}; the model_keys setting allows keys of the model's own)"
        problem = field_problem(key, value) or field_size_problem(key, value)
        if problem:
            return problem
    return None


def _own_key_problem(key: str, value: Any) -> str | None:
    """Why a key of the model's own may not hold `value`: one that only JSON can say (keys of
    mappings strings, as every command prints the state as JSON too), within one field's size."""
    if not key.strip() or key != key.strip() or not key.isprintable():
        return f"key {key!r} is not a name (empty, spaces around it, or a control character in it)"
    if problems({key: value}):
        return f"key '{key}': {problems({key: value})[0]}"
    if _has_non_finite(value):
        return f"key '{key}' holds NaN or Infinity, which JSON cannot say (`agent show --json` prints the state)"
    return field_size_problem(key, value)


def _has_non_finite(value: Any) -> bool:
    """Whether a NaN or an infinity is anywhere in `value` (iterative: no depth can crash it)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


# The summary `done` records when the model gave none, as msa recorded it ("Task complete."); the
# note says none was given. Only the dispatch fills it in: the tool's schema still asks for one.
NO_SUMMARY = "Task complete."


def apply_done(state: dict, summary: str, note: str | None = None) -> dict:
    """done: current task to completed_tasks (with the summary, and "check": "passed" when it had
    a check: only a passed check lets done get here), next pending action becomes current.
    `note`: what the [COMPLETED] note says, when it is not the summary."""
    new = copy.deepcopy(state)
    if new["current_task"]:
        checked = {"check": "passed"} if checks.check_for(state, new["current_task"]) else {}
        new["completed_tasks"].append({"task": new["current_task"], "summary": summary, **checked})
    new["current_task"] = new["pending_actions"].pop(0) if new["pending_actions"] else None
    checks.prune_checks(new)  # a check lives as long as its task is queued
    add_note(new, Tag.COMPLETED.line(summary if note is None else note))
    return new


def dispatch(
    state: dict,
    reply: Any,
    registry: Registry,
    ctx: ToolContext,
    cut_at: int | None = None,
    offered: dict | None = None,
    gates: Gate = NO_GATES,
) -> tuple[dict, Outcome]:
    """Apply one reply to a copy of `state`. Never raises (short of KeyboardInterrupt).
    `gates` are asked before a valid call is applied (`on_action`, `on_done`): a refusal is noted
    as the tool's own would be; a call a gate holds (agent/gates/approvals.py) is not run: it comes
    back as an APPROVAL outcome, not noted.
    `cut_at`: the reply was cut at this many tokens (finish_reason "length"); one that then does
    not parse is reported as cut, not as whatever its truncated JSON happens to lack.
    `offered`: the action schema the model was asked to follow (`Completion.schema`), when it
    offered less than the registry: a call outside it is refused like bad arguments."""
    action = _action(reply, registry, ctx, cut_at, offered)
    if isinstance(action, Outcome):
        return _noted(state, action)
    name, args = action
    if name == "update_scratchpad":
        return _update(state, Action(registry[name], args, ctx), gates)
    if name == "done":
        return _done(state, Action(registry[name], args, ctx), gates)
    return _run_tool(state, Action(registry[name], args, ctx), gates)


def _update(state: dict, action: Action, gates: Gate) -> tuple[dict, Outcome]:
    """update_scratchpad: the fields (apply_update), then the memory sections, when the home has them
    (`ctx.memory`: their own rules, read-only sections refused by name), then the gates; all or nothing."""
    args, memory, name = action.args, action.ctx.memory, action.tool.name
    fields, edits = memory.split(args) if memory is not None else (args, {})
    new, refusal = apply_update(state, fields, action.ctx.settings.model_keys)
    change = memory.apply(new, edits) if memory is not None and not refusal else None
    if change is not None:
        new, refusal = change.state, change.refusal
    refusal = refusal or gates.on_action(state, action._replace(after=new))
    if refusal:
        note = Tag.TOOL_ERROR.line(f"update_scratchpad refused: {refusal}")
        return _noted(state, Outcome(Tag.TOOL_ERROR, note, name, args))
    if action.ctx.origins is not None:  # what it had read when each entry it wrote appeared
        action.ctx.origins.written(state, new)
    said = ([", ".join(fields)] if fields else []) + list(change.notes if change else ())  # what each section did
    leaving = change.leaving if change else ()
    return _noted(new, Outcome(Tag.UPDATE, Tag.UPDATE.line("; ".join(said) or "nothing"), name, args, leaving=leaving))


def _action(
    reply: Any, registry: Registry, ctx: ToolContext, cut_at: int | None, offered: dict | None
) -> Outcome | tuple[str, dict]:
    """(tool name, redacted args) of a reply that calls a tool as offered, else the Outcome saying why not."""
    try:
        # the one check of a reply, msa's leniencies first (done without a summary, the model's own keys)
        name, args, checked = registry.called(
            reply, ctx.settings.max_reply_bytes, _msa_lenient(ctx.settings.model_keys)
        )
    except NotACall as no:
        problem = (
            f"the reply was cut at max_output_tokens ({cut_at}) before its JSON closed; raise max_output_tokens"
            if no.unparsed and cut_at is not None
            else no.noted
        )
        return Outcome(no.tag, no.tag.line(problem), no.name, no.call_args)
    problem = _not_offered(offered, name, registry[name].offered_args(checked))
    if problem:
        return Outcome(Tag.TOOL_ERROR, Tag.TOOL_ERROR.line(f"{name}: {problem}"), name, args)
    return name, ctx.secrets.redact(args)  # no tool ever receives a secret from the model (to send, write or echo)


def _msa_lenient(model_keys: bool):
    """What msa's prompts may leave out or add, made checkable before the tool's schema checks a call
    (Registry.called's `prepare`): (the arguments the call keeps, those checked, a refusal)."""

    def prepare(tool: Any, args: Any) -> tuple[Any, Any, str | None]:
        if tool.name == "done" and isinstance(args, dict) and "summary" not in args:
            args = {**args, "summary": None}  # msa's prompts may leave it out: _done records NO_SUMMARY
        checked, problem = _as_checked(tool, args, model_keys)
        return args, checked, problem

    return prepare


def _as_checked(tool: Any, args: Any, model_keys: bool) -> tuple[Any, str | None]:
    """The arguments as the tool's schema checks them, or why they are refused first: done's summary
    left out (None here) checked as the default one; update_scratchpad's keys of the model's own
    left to _update_problem when the model_keys setting allows them, else refused naming it."""
    if not isinstance(args, dict):
        return args, None
    if tool.name == "done" and args.get("summary", "") is None:
        return {**args, "summary": NO_SUMMARY}, None
    if tool.name != "update_scratchpad":
        return args, None
    own = [k for k in args if k not in tool.args_schema["properties"] and k not in tool.unoffered]
    if own and not model_keys:
        fields = ", ".join(tool.args_schema["properties"])
        return args, (
            f"unexpected argument '{_clip(str(own[0]), 60)}' (arguments: {fields}; "
            f"the model_keys setting lets the model keep keys of its own)"
        )
    return {k: v for k, v in args.items() if k not in own}, None


def _not_offered(offered: dict | None, name: str, args: dict) -> str | None:
    """Why a call the registry accepts is outside the narrower action schema the model was offered."""
    if offered is None:
        return None
    options = [o for o in offered.get("anyOf", []) if o["properties"]["tool"].get("const") == name]
    if not options:
        return "not offered for this step"
    problem = check(args, options[0]["properties"]["args"], "args")
    return f"not as offered for this step: {problem}" if problem else None


def _done(state: dict, action: Action, gates: Gate) -> tuple[dict, Outcome]:
    args, ctx = action.args, action.ctx
    refusal = gates.on_done(state, action)  # the check gate runs the task's acceptance check, if it has one
    if refusal:
        note = Tag.CHECK_FAILED.line(_clip(ctx.secrets.redact_text(refusal), ctx.settings.note_result_chars + 200))
        return _noted(state, Outcome(Tag.CHECK_FAILED, note, "done", args))
    if args["summary"] is None:  # left out: the default, and a note saying so
        note = f"{NO_SUMMARY} (done was called without a summary)"
        return apply_done(state, NO_SUMMARY, note), Outcome(Tag.COMPLETED, Tag.COMPLETED.line(note), "done", args)
    summary = _clip(args["summary"], max(ctx.settings.note_result_chars, 200))
    return apply_done(state, summary), Outcome(Tag.COMPLETED, Tag.COMPLETED.line(summary), "done", args)


def _run_tool(state: dict, action: Action, gates: Gate) -> tuple[dict, Outcome]:
    """Run a registered tool with valid (redacted) arguments: its result, or why it failed, noted."""
    tool, args, ctx = action.tool, action.args, action.ctx
    name, clip = tool.name, ctx.settings.note_result_chars
    shown_args = _clip(ctx.secrets.redact_text(json.dumps(args, ensure_ascii=False)), 200)
    # Redacted before clipping: a cut must never leave the first half of a key in the notes.
    try:
        refusal = gates.on_action(state, action)  # refused as the tool itself would refuse it
        if refusal:
            raise ToolError(refusal)
        if ctx.origins is not None:  # where its result comes from, as the runtime sees it (tools/origins.py)
            ctx.origins.ran(tool, args, ctx.workspace)
        result = ctx.run(tool, args)  # journaled when it has side effects (agent/cycle/journal.py)
    except NeedsApproval:  # the note is the parker's to write: it knows the call's id
        return copy.deepcopy(state), Outcome(
            Tag.APPROVAL, Tag.APPROVAL.line(f"{name}({shown_args}) needs approval"), name, args
        )
    except ToolError as exc:
        why = _clip(ctx.secrets.redact_text(str(exc)), clip)
        return _noted(state, Outcome(Tag.TOOL_ERROR, Tag.TOOL_ERROR.line(f"{name}({shown_args}): {why}"), name, args))
    except Exception as exc:  # a tool's bug must not end the cycle
        why = _clip(ctx.secrets.redact_text(str(exc)), clip)
        return _noted(
            state,
            Outcome(
                Tag.TOOL_ERROR,
                Tag.TOOL_ERROR.line(f"{name}({shown_args}) raised {type(exc).__name__}: {why}"),
                name,
                args,
            ),
        )
    shown = _clip(ctx.secrets.redact_text(_one_line(result)), clip)
    return _noted(state, Outcome(Tag.TOOL, Tag.TOOL.line(f"{name}({shown_args}) -> {shown}"), name, args, shown))


def _one_line(result: Any) -> str:
    """A tool's result as one line: its lines joined (escaping is the note's, when it enters the state)."""
    return "; ".join(line.strip() for line in str(result).splitlines() if line.strip())


def _noted(state: dict, outcome: Outcome) -> tuple[dict, Outcome]:
    """`state` with the outcome's note added, escaped once as it enters the state (add_note): one
    line whatever the model or a tool put in it (a newline in an argument's name, an escape sequence,
    text that cannot be written as UTF-8), and the outcome says exactly that line."""
    new = copy.deepcopy(state)
    note = add_note(new, outcome.note)
    result = None if outcome.result is None else escape_controls(outcome.result)  # the same text, for its readers
    return new, dataclasses.replace(outcome, note=note, result=result)
