"""The operator's edits to the queue and the goals, as data: one definition of what each does.

An edit is a small JSON-able record, {"op": "task_add", "text": ..., "first": false, "check": null},
{"op": "task_drop", "number": 2}, {"op": "goal_add", "text": ...}, {"op": "goal_drop",
"number": 1} or {"op": "resume"} (`agent resume`: changes no field; applying it is the change that
lets a held home call its model again, agent/gates/holds.py). `agent task` / `agent goal` apply one at once when the lock is free; when a cycle
holds it, the same record waits in the inbox (agent/memory/inbox.py) and is applied by `apply_edit` at
the next wake. Pure: state in, state changed in place, a message out; UsageError refuses.
"""

from __future__ import annotations

from typing import Any

import agent.gates.checks as checks
from agent.common.outcomes import UsageError

OPS = ("task_add", "task_drop", "goal_add", "goal_drop", "resume")
RESUME = {"op": "resume"}


def task_add(text: str, first: bool = False, check: str | None = None) -> dict:
    return {"op": "task_add", "text": text, "first": first, "check": check}


def task_drop(number: int) -> dict:
    return {"op": "task_drop", "number": number}


def goal_add(text: str) -> dict:
    return {"op": "goal_add", "text": text}


def goal_drop(number: int) -> dict:
    return {"op": "goal_drop", "number": number}


def describe(edit: dict) -> str:
    """An edit for a person: `task add 'X' (first) [check: C]`, `goal drop 2`."""
    op = str(edit.get("op", "?")).replace("_", " ")
    if edit.get("op") == "resume":
        return op
    if "number" in edit:
        return f"{op} {edit['number']}"
    text = f"{op} {edit.get('text')!r}" + (" (first)" if edit.get("first") else "")
    return text + (f" [check: {edit['check']}]" if edit.get("check") else "")


def _pick(items: list, number: Any, what: str) -> int:
    """The list index of item NUMBER (counted from 1), or a usage error naming the valid range."""
    if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= len(items):
        raise UsageError(
            f"there is no {what} {number}: "
            + (f"they are numbered 1 to {len(items)}" if items else f"the {what} list is empty")
        )
    return number - 1


def _text(edit: dict) -> str:
    text = edit.get("text")
    if not isinstance(text, str) or not text.strip():
        raise UsageError(f"{edit.get('op', 'edit')}: the text is empty")
    return text.strip()


def apply_edit(state: dict, edit: dict) -> str:
    """Apply one edit to `state` in place and say what it did; UsageError refuses it (callers
    apply to a copy: a refused edit may have changed part of it)."""
    op = edit.get("op") if isinstance(edit, dict) else None
    if op not in OPS:
        raise UsageError(f"unknown edit {op!r} (edits: {', '.join(OPS)})")
    try:
        message = _APPLY[op](state, edit)
        if op.startswith("task"):
            checks.prune_checks(state)
    except ValueError as exc:  # a hand-edited `checks` value that is not a mapping of text
        raise UsageError(str(exc)) from exc
    return message


def _task_add(state: dict, edit: dict) -> str:
    text, check = _text(edit), edit.get("check")
    if check is not None and (not isinstance(check, str) or not check.strip()):
        raise UsageError("the check command is empty")
    if check is not None:
        checks.set_check(state, text, check)
    suffix = f" [check: {check}]" if check else ""
    if state["current_task"] is None:
        state["current_task"] = text
        return f"current task is now: {text}{suffix}"
    if edit.get("first"):
        state["pending_actions"].insert(0, text)
        return f"queued first (1 of {len(state['pending_actions'])}): {text}{suffix}"
    state["pending_actions"].append(text)
    n = len(state["pending_actions"])
    return f"queued ({n} of {n}): {text}{suffix}"


def _task_drop(state: dict, edit: dict) -> str:
    number = edit.get("number")
    if number == 0:
        if state["current_task"] is None:
            raise UsageError("there is no current task to drop")
        dropped = state["current_task"]
        state["current_task"] = state["pending_actions"].pop(0) if state["pending_actions"] else None
        return f"dropped current task: {dropped}; current is now: {state['current_task'] or '(none)'}"
    dropped = state["pending_actions"].pop(_pick(state["pending_actions"], number, "pending task"))
    return f"dropped pending task {number}: {dropped}"


def _goal_add(state: dict, edit: dict) -> str:
    text = _text(edit)
    state["goals"].append(text)
    return f"goal {len(state['goals'])} added: {text}"


def _goal_drop(state: dict, edit: dict) -> str:
    dropped = state["goals"].pop(_pick(state["goals"], edit.get("number"), "goal"))
    return f"dropped goal {edit.get('number')}: {dropped}"


def _resume(state: dict, edit: dict) -> str:
    return "resumed by the operator: the model is called again, and a stalled task's streak starts over"


_APPLY = {
    "task_add": _task_add,
    "task_drop": _task_drop,
    "goal_add": _goal_add,
    "goal_drop": _goal_drop,
    "resume": _resume,
}
