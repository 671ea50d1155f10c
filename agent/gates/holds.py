"""Holds: a stuck home stops spending until something changes.

After a cycle that stalled (exit 9) or parked a call for the operator (exit 8), later cycles call
no model until something changes. Such a cycle is held: recorded like an idle one (one cycle
record, no snapshot pair, no log), with stop reason `held`, `held_for: stalled` or
`held_for: awaiting_approval`, and the exit code of what it waits on (9 or 8).

What the hold is judged against is the newest record that is not idle (read backwards, at most
`READ_CAP` records): a stalled or parked cycle, or a held one, which repeats what it holds after
(its digests, its task's identity, when the task stalled, its incident's signature), so one record
is read however long the hold lasts. Any of these is a change, and the cycle runs:

- the stalled task itself was edited or dropped (even if the same text was queued again): the
  current task's identity at wake is not the record's (agent/store/task_identity.py);
- the goals or memory changed (`agent memory`, the inbox, a reset or restore, an edit by hand): the
  state at wake is not the one that record left, the queue apart (`memory_digest`: everything but
  `pending_actions`, the other tasks' checks and `last_updated`); a refused inbox edit's note is such
  a change too;
- `agent resume` was applied at this wake;
- a killed cycle left a call with side effects unfinished, which the model must be told of;
- wake_when printed something else than at the last wake (`wake_digest`);
- a call the operator approved or denied waits to be run or told; for a parked call, no call
  is pending any more.

A task queued behind a stalled one (`agent task add`, the inbox, a hand edit of
`pending_actions`), or a queued task dropped, is not a change: the hold lasts, and the new task
waits behind the stalled one, as `status` says ("held: task 'X' stalled on Tue 1 Dec 10:00 UTC; 2
tasks wait behind it"). The queue does not move past a stalled task by itself: dropping it
(`agent task drop 0`) is the operator's call.

`agent run --force` is never held. A record without `memory_digest` (an older release's) is judged
by its `active_digest` (any change to active.yaml ends the hold); one without either is never held
after: the next stall records them.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from typing import Any, Iterable

from agent.common.outcomes import Held, StopReason
from agent.gates.base import Gate
from agent.scratchpad import file_digest
from agent.store.cycles import newest_first
from agent.store.db import any_rows
from agent.store.home import Home

HOLDING = (StopReason.STALLED, StopReason.AWAITING_APPROVAL)  # what a hold is for
READ_CAP = 1000  # records read back at most to find the newest that is not idle
DECIDED = (
    "the operator approves or denies it, or something else changes: the current task edited or dropped, a goal "
    "or memory edit, new wake_when output, or `agent resume`"
)
CHANGES = (
    "something changes: the stalled task edited or dropped, a goal or memory edit, an approval or denial, "
    "new wake_when output, or `agent resume`"
)
NOT_COMPARED = ("pending_actions", "last_updated", "checks", "inbox_applied")  # the queue, and the runtime's stamps


def memory_digest(state: dict) -> str:
    """sha256 of what a hold compares of a (redacted) state: all of it but the queue behind the
    current task (`pending_actions`, the checks of tasks other than the current one) and the stamps."""
    kept = {key: value for key, value in state.items() if key not in NOT_COMPARED}
    checks = state.get("checks")
    kept["check"] = checks.get(state.get("current_task")) if isinstance(checks, dict) else checks
    text = json.dumps(kept, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def newest_working(records: Iterable[dict]) -> dict | None:
    """The newest record that is not idle, from records given newest first (at most READ_CAP read)."""
    for seen, record in enumerate(records):
        if seen >= READ_CAP:
            return None
        if record.get("source", "index") == "index" and record.get("stop_reason") != StopReason.IDLE.value:
            return record
    return None


def held_for(record: dict) -> StopReason | None:
    """What a record holds the next cycles for: its own stop reason (stalled, awaiting_approval), or
    for a held record what it was held for; None: nothing."""
    reason = record.get("held_for") if record.get("stop_reason") == StopReason.HELD.value else record.get("stop_reason")
    return next((r for r in HOLDING if r.value == reason), None)


def _decided_calls(home: Home) -> tuple[bool, bool]:
    """(a call approved or denied waits to be run or told, a call is pending), from the parked calls."""
    if not any_rows(home, "approval"):  # nothing was ever parked: approvals.py is not imported
        return False, False
    from agent.gates.approvals import APPROVED, DENIED, PENDING, read_approvals

    records = read_approvals(home)  # unreadable: InvalidScratchpad (exit 6), as the approval gate says
    decided = any(r["status"] == APPROVED or (r["status"] == DENIED and r["handled_in"] is None) for r in records)
    return decided, any(r["status"] == PENDING for r in records)


def what_changed(home: Home, base: dict, reason: StopReason, woke) -> str | None:
    """What changed since `base` (the record the hold is judged against), or None: nothing did."""
    if woke.resumed:
        return "agent resume"
    if woke.interrupted:
        return "a killed cycle left a call the model must be told of"
    if isinstance(base.get("task_id"), str) and woke.task_id != base["task_id"]:
        return "the current task was edited or dropped"
    if isinstance(base.get("memory_digest"), str):
        if woke.memory_digest != base["memory_digest"]:
            return "the goals or memory changed"
    elif not isinstance(base.get("active_digest"), str) or file_digest(home.active) != base["active_digest"]:
        return "active.yaml changed"  # an older release's record: any change to the file
    if woke.wake_digest is not None and woke.wake_digest != base.get("wake_digest"):
        return "wake_when printed something new"
    decided, pending = _decided_calls(home)
    if decided:
        return "the operator approved or denied a call"
    if reason is StopReason.AWAITING_APPROVAL and not pending:
        return "no call waits for the operator any more"
    return None


def stalled_on(base: dict) -> Any:
    """When the task a hold is for stalled: the stalled cycle's start (a held record repeats it)."""
    return base.get("started") if base.get("stop_reason") == StopReason.STALLED.value else base.get("stalled_on")


def when_text(stamp: Any) -> str:
    """`Tue 1 Dec 10:00 UTC` for an ISO time stamp; the stamp as it is when it is not one."""
    try:
        when = _dt.datetime.fromisoformat(str(stamp)).astimezone(_dt.timezone.utc)
    except ValueError:
        return str(stamp)
    return f"{when:%a} {when.day} {when:%b %H:%M} UTC"


def held_text(base: dict, reason: StopReason, waiting: int = 0) -> str:
    """What a held cycle says (its record's `idle`, the line `status` shows)."""
    if reason is StopReason.AWAITING_APPROVAL:
        waits = base.get("signature") or "a parked call"
        return (
            f"held: {waits} awaits the operator (`agent approvals` lists it) and nothing else changed since "
            f"cycle {base.get('cycle_id')}; the model is not called until {DECIDED}"
        )
    task = base.get("task_after")
    what = "planning from the goals (no current task)" if task is None else f"task {_shown(task)}"
    behind = f"{waiting} task{'s' if waiting != 1 else ''} wait{'s' if waiting == 1 else ''} behind it"
    return f"held: {what} stalled on {when_text(stalled_on(base))}; {behind}; the model is not called until {CHANGES}"


def _shown(task: Any) -> str:
    return repr(task) if len(repr(task)) <= 200 else f"{repr(task)[:200]}..."


class HoldGate(Gate):
    """After a stall or a parked call, a cycle in which nothing changed is held at wake: no model."""

    def at_wake(self, state: dict) -> None:
        cycle = self.cycle
        if cycle.woke.forced:
            return
        base = newest_working(newest_first(cycle.home))
        reason = None if base is None else held_for(base)
        if reason is None or what_changed(cycle.home, base, reason, cycle.woke) is not None:
            return
        waiting = len(state.get("pending_actions") or [])
        raise Held(
            held_text(base, reason, waiting),
            reason,
            signature=base.get("signature"),
            repeated={
                **{key: base.get(key) for key in ("active_digest", "wake_digest")},
                "stalled_on": stalled_on(base) if reason is StopReason.STALLED else None,
            },
        )
