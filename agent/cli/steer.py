"""Steering between cycles: `agent task` and `agent goal` edit the queue and the goals.

Every edit takes the home's lock, reads active.yaml, changes it, validates and writes it
atomically, so it is safe while cron runs (a running cycle makes it exit 5, busy, unless --wait).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Callable

import click

from ..state import problems
from ..outcomes import InvalidScratchpad, UsageError
from ..store.lock import home_lock
from ..store.state_file import load_state, write_state
from .common import echo, existing_home, home_option, json_option, print_json, reports_errors, wait_option


def edit_state(home_dir: Path, lock_wait: float, change: Callable[[dict], str]) -> tuple[dict, str]:
    """Lock, read active.yaml (missing: a fresh state), apply `change`, validate, write atomically.

    `change` edits the state in place and returns a message; it raises UsageError to refuse,
    in which case nothing is written. An unreadable active.yaml is InvalidScratchpad (exit 6).
    """
    home = existing_home(home_dir)
    with home_lock(home, wait=lock_wait):
        home.ensure_dirs()
        original = load_state(home)
        state = copy.deepcopy(original)
        message = change(state)
        found = problems(state)
        if found:  # a bug in a change function, never the user's input: refuse rather than save
            raise InvalidScratchpad(f"refusing to write {home.active}: {'; '.join(found)}")
        if state != original or not home.active.exists():
            write_state(home.active, state)
    return state, message


def _nonblank(text: str, what: str) -> str:
    text = text.strip()
    if not text:
        raise UsageError(f"{what} text is empty")
    return text


def _pick(items: list, number: int, what: str) -> int:
    """The list index of item NUMBER (counted from 1), or a usage error naming the valid range."""
    if not 1 <= number <= len(items):
        raise UsageError(f"there is no {what} {number}: " + (f"they are numbered 1 to {len(items)}" if items
                                                                else f"the {what} list is empty"))
    return number - 1


def _report_edit(state: dict, message: str, as_json: bool) -> None:
    if as_json:
        print_json({"message": message, "goals": state["goals"], "current_task": state["current_task"],
                    "pending_actions": state["pending_actions"]})
    else:
        echo(message)


# ----------------------------------------------------------------------------------------- task


@click.group()
def task() -> None:
    """Edit the task queue (current_task and pending_actions) safely, even while cron runs."""


@task.command("list")
@home_option
@json_option
@reports_errors
def task_list(home_dir: Path, as_json: bool) -> None:
    """The current task, then the pending ones numbered for `agent task drop N`."""
    state = load_state(existing_home(home_dir))
    if as_json:
        print_json({"current_task": state["current_task"], "pending_actions": state["pending_actions"]})
        return
    echo(f"current: {state['current_task'] or '(none)'}")
    for i, item in enumerate(state["pending_actions"], 1):
        echo(f"{i:>7}. {item}")
    if not state["pending_actions"]:
        click.echo("         (nothing pending)")


@task.command("add")
@home_option
@click.argument("text")
@click.option("--first", is_flag=True, help="Put it at the front of the queue instead of the end.")
@wait_option
@json_option
@reports_errors
def task_add(home_dir: Path, text: str, first: bool, lock_wait: float, as_json: bool) -> None:
    """Queue a task. With no current task it becomes the current task right away."""
    text = _nonblank(text, "task")

    def change(state: dict) -> str:
        if state["current_task"] is None:
            state["current_task"] = text
            return f"current task is now: {text}"
        if first:
            state["pending_actions"].insert(0, text)
            return f"queued first (1 of {len(state['pending_actions'])}): {text}"
        state["pending_actions"].append(text)
        n = len(state["pending_actions"])
        return f"queued ({n} of {n}): {text}"

    _report_edit(*edit_state(home_dir, lock_wait, change), as_json)


@task.command("drop")
@home_option
@click.argument("number", type=int)
@wait_option
@json_option
@reports_errors
def task_drop(home_dir: Path, number: int, lock_wait: float, as_json: bool) -> None:
    """Remove pending task NUMBER (as `agent task list` shows it). 0 drops the current task;
    the first pending one then becomes current."""

    def change(state: dict) -> str:
        if number == 0:
            if state["current_task"] is None:
                raise UsageError("there is no current task to drop")
            dropped = state["current_task"]
            state["current_task"] = state["pending_actions"].pop(0) if state["pending_actions"] else None
            return f"dropped current task: {dropped}; current is now: {state['current_task'] or '(none)'}"
        dropped = state["pending_actions"].pop(_pick(state["pending_actions"], number, "pending task"))
        return f"dropped pending task {number}: {dropped}"

    _report_edit(*edit_state(home_dir, lock_wait, change), as_json)


# ----------------------------------------------------------------------------------------- goal


@click.group()
def goal() -> None:
    """Edit the agent's goals safely, even while cron runs."""


@goal.command("add")
@home_option
@click.argument("text")
@wait_option
@json_option
@reports_errors
def goal_add(home_dir: Path, text: str, lock_wait: float, as_json: bool) -> None:
    """Add a goal at the end of the list."""
    text = _nonblank(text, "goal")

    def change(state: dict) -> str:
        state["goals"].append(text)
        return f"goal {len(state['goals'])} added: {text}"

    _report_edit(*edit_state(home_dir, lock_wait, change), as_json)


@goal.command("list")
@home_option
@json_option
@reports_errors
def goal_list(home_dir: Path, as_json: bool) -> None:
    """The goals, numbered for `agent goal drop N`."""
    state = load_state(existing_home(home_dir))
    if as_json:
        print_json({"goals": state["goals"]})
        return
    for i, item in enumerate(state["goals"], 1):
        echo(f"{i:>3}. {item}")
    if not state["goals"]:
        click.echo("(no goals)")


@goal.command("drop")
@home_option
@click.argument("number", type=int)
@wait_option
@json_option
@reports_errors
def goal_drop(home_dir: Path, number: int, lock_wait: float, as_json: bool) -> None:
    """Remove goal NUMBER (as `agent goal list` shows it)."""

    def change(state: dict) -> str:
        dropped = state["goals"].pop(_pick(state["goals"], number, "goal"))
        return f"dropped goal {number}: {dropped}"

    _report_edit(*edit_state(home_dir, lock_wait, change), as_json)
