"""The operator's edits to the queue, the goals and the memory sections, as data: one definition
of what each does.

An edit is a small JSON-able record, {"op": "task_add", "text": ..., "first": false, "check": null},
{"op": "task_drop", "number": 2}, {"op": "goal_add", "text": ...}, {"op": "goal_drop",
"number": 1}, {"op": "resume"} (`agent resume`: changes no field; applying it is the change that
lets a held home call its model again, agent/gates/holds.py), or, for a section config.yaml defines,
{"op": "memory_add", "section": "known", "text": ...}, {"op": "memory_drop", "section": "known",
"id": "known-3"} or {"op": "memory_set", "section": "purpose", "text": ...}. `agent task` / `agent
goal` / `agent memory` apply one at once when the lock is free; when a cycle holds it, the same
record waits in the inbox (agent/memory/inbox.py) and is applied by `apply_edit` at the next wake.
Pure: state in, state changed in place, a message out; UsageError refuses. A memory edit is the
operator's (agent/memory/section_edits.py `operator_edit`, read-only sections included); what it moves
out of a section is added to the `EditContext`'s `leaving`, for the caller to archive before it saves.

What leaves the queue without `done` (the model dropping, renaming or replacing a queued task, a
restore or a reset replacing the queue) is told by `dropped_tasks`, the one comparison of two
queues, and archived with kind QUEUED_TASK (`queue_drops`) before the state that lost it is saved;
a pending task or a goal the operator drops (`task drop N`, `goal drop N`) is archived the same way
(kind QUEUED_TASK or DROPPED_GOAL, reason the command), through the `EditContext`'s `leaving`; the
current task `task drop 0` drops is its own kind (`dropped_task`, agent/store/archive.py: the task's
identity reads it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

import agent.memory.task_checks as checks
from agent.common.outcomes import UsageError
from agent.common.reading import reads_empty
from agent.memory.builtin import RULES, Stamp, missing
from agent.store.archive import Left

OPS = ("task_add", "task_drop", "goal_add", "goal_drop", "memory_add", "memory_drop", "memory_set", "resume")
MEMORY_OPS = ("memory_add", "memory_drop", "memory_set")
RESUME = {"op": "resume"}
QUEUED_TASK = RULES["pending_actions"].leaves_as  # the archive's kind for a task that left the queue without done
DROPPED_GOAL = RULES["goals"].leaves_as  # the archive's kind for a goal the model or `goal drop` dropped


@dataclass
class EditContext:
    """What a memory edit needs: the sections config.yaml defines (memory/sections.py SectionSpec),
    the stamp its entries take (the waking cycle's, or the command's), and a list that collects what
    the edits moved out of a section, the queue or the goals."""

    specs: tuple = ()
    stamp: Any = None  # memory/builtin.py Stamp; None: now
    floor: dict = field(default_factory=dict)  # the highest id of each section the archive holds
    leaving: list = field(default_factory=list)
    dropped: list = field(default_factory=list)  # current tasks `agent task drop 0` dropped: archived (inbox.py)


def task_add(text: str, first: bool = False, check: str | None = None) -> dict:
    return {"op": "task_add", "text": text, "first": first, "check": check}


def task_drop(number: int) -> dict:
    return {"op": "task_drop", "number": number}


def goal_add(text: str) -> dict:
    return {"op": "goal_add", "text": text}


def goal_drop(number: int) -> dict:
    return {"op": "goal_drop", "number": number}


def memory_edit(op: str, section: str, value: str) -> dict:
    """`agent memory add|set SECTION TEXT` or `drop SECTION ID`, as a record."""
    return {"op": f"memory_{op}", "section": section, "id" if op == "drop" else "text": value}


def describe(edit: dict) -> str:
    """An edit for a person: `task add 'X' (first) [check: C]`, `goal drop 2`, `memory drop known known-3`."""
    op = str(edit.get("op", "?")).replace("_", " ")
    if edit.get("op") == "resume":
        return op
    if "number" in edit:
        return f"{op} {edit['number']}"
    if "section" in edit:
        return f"{op} {edit['section']} " + (f"{edit['id']}" if "id" in edit else repr(edit.get("text")))
    text = f"{op} {edit.get('text')!r}" + (" (first)" if edit.get("first") else "")
    return text + (f" [check: {edit['check']}]" if edit.get("check") else "")


def dropped_tasks(before: dict, after: dict, completed: Iterable[Any] = ()) -> list[str]:
    """The tasks `before` queues that `after` does not, nor `completed` (entries completed between
    the two: done's {"task": ..., "summary": ...}), in `before`'s order; duplicates counted. Two
    queues are compared by their tasks' text (builtin.py `missing`): what leaves memory is text, so a
    rename archives the old text, while the task's identity (agent/store/task_identity.py, the one
    the records keep: the stall streak and the holds follow it) stays the one the cycle woke with."""
    done = [entry["task"] for entry in completed if isinstance(entry, dict) and isinstance(entry.get("task"), str)]
    return missing(checks.queued(before), [*checks.queued(after), *done])


def dropped_goals(before: dict, after: dict) -> list[str]:
    """The goals `before` holds that `after` does not (the model replaced the list), duplicates counted."""
    return missing(_texts(before.get("goals")), _texts(after.get("goals")))


def _texts(items: Any) -> list[str]:
    return [item for item in items or [] if isinstance(item, str)]


def queue_drops(tasks: Iterable[str], reason: str, kind: str = QUEUED_TASK) -> list[Left]:
    """The archive items (agent/store/archive.py Left) of tasks that left the queue without done (or,
    with kind DROPPED_GOAL, of goals)."""
    return [Left(kind, task, reason) for task in tasks]


def dropped_line(tasks: list[str], who: str = "the model", noun: str = "queued task") -> str:
    """The note that says what left the queue: "the model dropped 2 queued tasks: a; b (...)"."""
    shown = "; ".join(task if len(task) <= 200 else task[:199] + "…" for task in tasks[:20])
    more = f"; and {len(tasks) - 20} more" if len(tasks) > 20 else ""
    return (
        f"{who} dropped {len(tasks)} {noun}{'s' if len(tasks) != 1 else ''}: {shown}{more} "
        "(archived: `agent show --all` lists them, recall finds them)"
    )


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
    if not isinstance(text, str) or reads_empty(text):  # nothing a person could read: U+200B alone too
        raise UsageError(f"{edit.get('op', 'edit')}: the text is empty")
    return text.strip()


def apply_edit(state: dict, edit: dict, context: EditContext | None = None) -> str:
    """Apply one edit to `state` in place and say what it did; UsageError refuses it (callers
    apply to a copy: a refused edit may have changed part of it). A memory edit needs `context`."""
    op = edit.get("op") if isinstance(edit, dict) else None
    if op not in OPS:
        raise UsageError(f"unknown edit {op!r} (edits: {', '.join(OPS)})")
    context = context or EditContext()
    if op in MEMORY_OPS:
        return _memory(state, edit, context)
    try:
        current, pending, goals = state["current_task"], list(state["pending_actions"]), list(state["goals"])
        message = _APPLY[op](state, edit)
        if op == "task_drop" and edit.get("number") == 0:  # the operator's change of the current task
            context.dropped.append(current)
        elif op == "task_drop":  # nothing leaves the queue or the goals unarchived, the operator's drop too
            context.leaving += queue_drops(
                missing(pending, state["pending_actions"]), f"agent task drop {edit['number']}"
            )
        elif op == "goal_drop":
            context.leaving += queue_drops(
                missing(goals, state["goals"]), f"agent goal drop {edit['number']}", DROPPED_GOAL
            )
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


def _memory(state: dict, edit: dict, context: EditContext) -> str:
    """An operator's edit of a section, in place; what it moved out added to `context.leaving`."""
    from agent.memory.section_edits import operator_edit  # only memory edits need them
    from agent.memory.section_settle import settle
    from agent.memory.sections import specs_by_name

    section, op = edit.get("section"), str(edit["op"]).removeprefix("memory_")
    spec = specs_by_name(context.specs).get(section) if isinstance(section, str) else None
    if spec is None:
        names = ", ".join(s.name for s in context.specs) or "none"
        raise UsageError(f"there is no section {section!r} in config.yaml (sections: {names})")
    value = edit.get("id" if op == "drop" else "text")
    if not isinstance(value, str):
        raise UsageError(f"memory {op}: the {'id' if op == 'drop' else 'text'} is missing")
    stamp = context.stamp or Stamp.of()
    woken = settle(state, context.specs, stamp, context.floor)  # as at wake: entries adopted, counters raised
    change = operator_edit(woken.state, spec, op, value, stamp)
    if change.refusal:
        raise UsageError(change.refusal)
    state.clear()
    state.update(change.state)
    context.leaving.extend([*woken.leaving, *change.leaving])
    return "; ".join([*woken.notes, *change.notes]) or f"{section}: unchanged"


_APPLY = {
    "task_add": _task_add,
    "task_drop": _task_drop,
    "goal_add": _goal_add,
    "goal_drop": _goal_drop,
    "resume": _resume,
}
