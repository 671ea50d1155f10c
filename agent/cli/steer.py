"""Steering between cycles: `agent task` and `agent goal` edit the queue and the goals; `agent resume`
lets a held home call its model again.

An edit never blocks and is never lost. When the home's lock is free, the command takes it,
applies any edits queued earlier (the inbox), then its own, validates and writes active.yaml
atomically. When a cycle holds the lock (past --wait), the edit is queued in the inbox
(logs/agent.db) and the command exits 0 saying so: the next wake applies it, in order.
What each edit does is defined once, in agent/memory/queue_edits.py.
"""

from __future__ import annotations

import contextlib
import copy
from pathlib import Path

import click

import agent.memory.queue_edits as queue_edits
import agent.memory.task_checks as checks
from agent.cli.common import (
    echo,
    existing_home,
    home_option,
    home_settings,
    json_option,
    operator_text,
    print_json,
    reports_errors,
    wait_seconds,
)
from agent.common.outcomes import Busy, InvalidScratchpad
from agent.config import Settings
from agent.memory.inbox import apply_inbox, archive_operator_leaving, queue_edit, queued_edits
from agent.memory.queue_edits import EditContext
from agent.memory.specs import Memory
from agent.scratchpad import load_state, write_state
from agent.secrets import Secrets
from agent.state import problems
from agent.store.home import Home
from agent.store.lock import home_lock

wait_option = click.option(
    "--wait",
    "lock_wait",
    type=wait_seconds,
    default=0.0,
    help="Seconds to wait for a running cycle to finish before queueing the edit for the next wake instead.",
)


def edit_state(home_dir: Path, lock_wait: float, edit: dict, as_json: bool) -> None:
    """Apply `edit` now under the lock (after the inbox), or queue it when a cycle holds the lock.

    A refused edit (UsageError) writes nothing; an unreadable active.yaml is InvalidScratchpad
    (exit 6). Either way the inbox is kept as it was. What a memory edit moves out of a section is
    archived before active.yaml is written.
    """
    home = existing_home(home_dir)
    settings = home_settings(home.root)  # a broken config.yaml: the defaults (a task edit still works)
    try:
        with home_lock(home, wait=lock_wait):
            home.ensure_dirs()
            original = load_state(home)
            memory = Memory.of(settings)
            memory.checked(original, home.active)  # a section's kind changed: exit 2, nothing written
            context = memory.edit_context(home, None)
            earlier = apply_inbox(home, original, context, Secrets.from_settings(settings))
            state = copy.deepcopy(earlier.state)
            message = queue_edits.apply_edit(state, edit, context)
            found = problems(state)
            if found:  # a bug in an edit, never the user's input: refuse rather than save
                raise InvalidScratchpad(f"refusing to write {home.active}: {'; '.join(found)}")
            _archive_and_record(home, settings, memory, context, (original, earlier.state, state))
            if state != original or not home.active.exists():
                write_state(home.active, state)
    except Busy:
        record = queue_edit(home, edit)
        message = f"a cycle is running: queued for the next wake: {queue_edits.describe(edit)}"
        if as_json:
            print_json({"queued": True, "id": record["id"], "edit": edit, "message": message})
        else:
            echo(message)
        return
    if as_json:
        print_json(
            {
                "queued": False,
                "message": message,
                "inbox_applied": earlier.messages,
                "inbox_refused": earlier.refused,
                "goals": state["goals"],
                "current_task": state["current_task"],
                "pending_actions": state["pending_actions"],
                "checks": state.get(checks.CHECKS_KEY, {}),
                **({"section": {edit["section"]: state.get(edit["section"])}} if "section" in edit else {}),
            }
        )
        return
    for line in [*(f"applied queued edit: {m}" for m in earlier.messages), *earlier.refused, message]:
        echo(line)


def _archive_and_record(home: Home, settings: Settings, memory: Memory, context: EditContext, states: tuple) -> None:
    """Before the state is written: archive what the memory edits moved out, and record where the
    entries they added came from (the inbox's queued edits applied first, then the command's own),
    in one transaction. `states`: as read, the inbox applied, the command's edit applied."""
    from agent.store.db import records
    from agent.store.provenance import add_provenance, operator_stamp, queued_rows

    read, queued, edited = states
    stamp = context.stamp.cycle if context.stamp is not None else operator_stamp()
    rows = queued_rows(read, queued, stamp, "inbox") + queued_rows(queued, edited, stamp, "operator")
    rows += memory.added(read, queued, stamp, "inbox") + memory.added(queued, edited, stamp, "operator")
    with records(home).write() if rows else contextlib.nullcontext():  # nothing added: the archive's own
        archive_operator_leaving(home, context, Secrets.from_settings(settings))
        add_provenance(home, rows)


# ----------------------------------------------------------------------------------------- task


@click.group()
def task() -> None:
    """Edit the task queue (current_task and pending_actions); never blocks: while a cycle runs,
    edits are queued and applied at the next wake."""


@task.command("list")
@home_option
@json_option
@reports_errors
def task_list(home_dir: Path, as_json: bool) -> None:
    """The current task, then the pending ones numbered for `agent task drop N`, each with its
    check if it has one, then the edits queued while a cycle runs (applied at the next wake)."""
    home = existing_home(home_dir)
    state, queued = load_state(home), queued_edits(home)
    task_checks = state.get(checks.CHECKS_KEY) or {}
    if as_json:
        print_json(
            {
                "current_task": state["current_task"],
                "pending_actions": state["pending_actions"],
                "checks": task_checks,
                "queued": queued,
            }
        )
        return

    def checked(task: str) -> str:
        return f"  [check: {task_checks[task]}]" if isinstance(task_checks, dict) and task in task_checks else ""

    echo(f"current: {state['current_task'] or '(none)'}{checked(state['current_task'])}")
    for i, item in enumerate(state["pending_actions"], 1):
        echo(f"{i:>7}. {item}{checked(item)}")
    if not state["pending_actions"]:
        echo("         (nothing pending)")
    for record in queued:
        echo(f" queued: {queue_edits.describe(record)}  (applied at the next wake)")


@task.command("add")
@home_option
@click.argument("text")
@click.option("--first", is_flag=True, help="Put it at the front of the queue instead of the end.")
@click.option(
    "--check",
    "check",
    metavar="COMMAND",
    help="An acceptance check: a shell command line run in the workspace when the model calls "
    "done; the done is accepted only if it exits 0 (within check_timeout).",
)
@wait_option
@json_option
@reports_errors
def task_add(home_dir: Path, text: str, first: bool, check: str | None, lock_wait: float, as_json: bool) -> None:
    """Queue a task. With no current task it becomes the current task right away."""
    if check is not None:
        check = operator_text(check, "check command", strip=False)
    edit_state(home_dir, lock_wait, queue_edits.task_add(operator_text(text, "task text"), first, check), as_json)


@task.command("drop")
@home_option
@click.argument("number", type=int)
@wait_option
@json_option
@reports_errors
def task_drop(home_dir: Path, number: int, lock_wait: float, as_json: bool) -> None:
    """Remove pending task NUMBER (as `agent task list` shows it). 0 drops the current task;
    the first pending one then becomes current."""
    edit_state(home_dir, lock_wait, queue_edits.task_drop(number), as_json)


# ----------------------------------------------------------------------------------------- goal


@click.group()
def goal() -> None:
    """Edit the agent's goals; never blocks: while a cycle runs, edits are queued."""


@goal.command("add")
@home_option
@click.argument("text")
@wait_option
@json_option
@reports_errors
def goal_add(home_dir: Path, text: str, lock_wait: float, as_json: bool) -> None:
    """Add a goal at the end of the list."""
    edit_state(home_dir, lock_wait, queue_edits.goal_add(operator_text(text, "goal text")), as_json)


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
        echo("(no goals)")


@goal.command("drop")
@home_option
@click.argument("number", type=int)
@wait_option
@json_option
@reports_errors
def goal_drop(home_dir: Path, number: int, lock_wait: float, as_json: bool) -> None:
    """Remove goal NUMBER (as `agent goal list` shows it)."""
    edit_state(home_dir, lock_wait, queue_edits.goal_drop(number), as_json)


# --------------------------------------------------------------------------------------- resume


@click.command()
@home_option
@json_option
@reports_errors
def resume(home_dir: Path, as_json: bool) -> None:
    """Let a held home call its model again at the next cycle, though nothing else changed.

    After a stall (exit 9) or a parked call (exit 8) later cycles are held, calling no model, until
    something changes; this is the change. A stalled task's streak starts over. Queued like any edit
    (a row of logs/agent.db's inbox table) and applied at the next wake, so it never waits for a running cycle."""
    home = existing_home(home_dir)
    record = queue_edit(home, queue_edits.RESUME)
    message = "queued: the next cycle calls the model again, and a stalled task's streak starts over"
    if as_json:
        print_json({"queued": True, "id": record["id"], "message": message})
    else:
        echo(message)
