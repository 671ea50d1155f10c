"""The acceptance checks bound to queued tasks, as part of the state: one command per task text
under the top-level key `checks` of active.yaml, which the runtime owns. Pure functions of a
state; running a check, and refusing a `done` whose check fails, is the check gate's
(agent/gates/checks.py)."""

from __future__ import annotations

from collections import Counter

# The top-level key of active.yaml that holds the operator's checks: {task text: command line}.
CHECKS_KEY = "checks"


def checks_of(state: dict) -> dict[str, str]:
    """The checks in a state. A hand-edited value that is not a mapping of text to text fails
    closed: every task then has an unrunnable check (see `check_for`)."""
    checks = state.get(CHECKS_KEY) or {}
    if not isinstance(checks, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in checks.items()):
        raise ValueError(f"'{CHECKS_KEY}' in active.yaml must map task text to a command line")
    return checks


def check_for(state: dict, task: str | None) -> str | None:
    """The command that must pass before `task` is done, or None when it has no check."""
    return checks_of(state).get(task) if task is not None else None


def queued(state: dict) -> list[str]:
    """The queue of a state: the current task, then the pending ones."""
    current = state.get("current_task")
    return ([current] if isinstance(current, str) and current else []) + [
        task for task in state.get("pending_actions") or [] if isinstance(task, str)
    ]


def checked_tasks_removed(old: dict, new: dict) -> list[str]:
    """Checked tasks queued in `old` that `new` no longer queues as often (renamed or removed)."""
    try:
        checked = checks_of(old)
    except ValueError:
        return []  # a malformed checks value already refuses every done
    before, after = Counter(queued(old)), Counter(queued(new))
    return [task for task in checked if after[task] < before[task]]


def checked_task_displaced(old: dict, new: dict) -> str | None:
    """The checked current task of `old` when `new` has another current task (None: it stays, or has no
    check). Behind it the queue is the model's to order, but a checked task, once current, stays current
    until its done passes: else a task of the model's own, put in front and done, passes every cycle
    for progress while the checked one waits, its check never run and its streak never growing."""
    try:
        command = check_for(old, old.get("current_task"))
    except ValueError:
        return None  # a malformed checks value already refuses every done
    return old["current_task"] if command is not None and new.get("current_task") != old["current_task"] else None


def set_check(state: dict, task: str, command: str) -> None:
    state[CHECKS_KEY] = {**checks_of(state), task: command}


def prune_checks(state: dict) -> None:
    """Drop the checks of tasks no longer queued (done or dropped); the key goes when empty.
    A malformed value is left for the operator (it refuses every done meanwhile)."""
    held = Counter(queued(state))
    try:
        kept = {task: command for task, command in checks_of(state).items() if held[task]}
    except ValueError:
        return
    if kept:
        state[CHECKS_KEY] = kept
    else:
        state.pop(CHECKS_KEY, None)
