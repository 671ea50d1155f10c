"""Stalls: the same task ending cycle after cycle without done.

A cycle that ends without done, on a task that has now ended `stall_cycles` cycles in a row
without done, stops with `stalled` (exit 9) instead of its limit's reason, so cron can alert.
The task is its identity (agent/store/task_identity.py), never its wording: renaming the
current task, swapping it with `pending_actions[0]` or rewriting the queue in any order is the
same task still, and reaches the stall as surely as doing nothing. Every cycle's record keeps the
streak it leaves (`streak`), so the streak is one record back, not a walk of the history; a
record of an earlier release (no `streak`) is counted back as far as its run goes, by its text.
Only cycles where the model worked on the task count:

- an accepted `done` ends the streak (the queue advanced: a new identity), and so does an
  operator's change of the current task (an edit or a drop: a new identity at wake);
- a failed cycle (exit 4: a prompt the endpoint refuses, the model unreachable, a bug: a stop
  reason in `FAILURES`) neither counts nor ends it: a failure stays a failure, so a home that
  cannot reach its model fails (exit 4) on every tick and `consecutive_failures` keeps counting,
  rather than turning an outage into a stall;
- one awaiting approval (exit 8), one whose budget was spent (exit 10), and idle and held cycles
  neither count nor end it: the model was not the one stuck, and exit 8/10 already tell the
  operator what to do;
- a cycle that applied `agent resume` counts and ends it: after a resume the task has a whole
  streak again;
- a cycle that leaves no current task and an empty queue counts only in an `idle: plan` home: there
  the model plans from the goals, and its progress is an accepted `done` (of a task it set itself);
  elsewhere (`idle: run`) there is no task to stall on.

A `done` the task's acceptance check refuses is not accepted, so a model that calls `done`
falsely on a checked task and queues it again stays on it and stalls; on a task without a check
an accepted `done` is progress by definition, and only budgets bound a model that games it.

After a stall, later cycles are held (agent/gates/holds.py) until something changes.
"""

from __future__ import annotations

import itertools
from typing import Any, Iterable

from agent.common.escape import escape_controls
from agent.common.outcomes import FAILURES, AgentError, StopReason
from agent.common.tags import Tag
from agent.config import Settings
from agent.gates.base import Gate
from agent.secrets import Secrets
from agent.state import add_note
from agent.store.cycles import newest_first
from agent.store.home import Home
from agent.store.task_identity import CONSOLIDATIONS, at_wake, has_identity, identity_of, newest_identified, of_task

NOT_COUNTED = {
    StopReason.AWAITING_APPROVAL.value,
    StopReason.BUDGET_EXHAUSTED.value,
    StopReason.IDLE.value,
    StopReason.HELD.value,
    StopReason.CONSOLIDATED.value,  # a consolidation is not a task's cycle: it neither counts nor ends a streak
    *(reason.value for reason in FAILURES),
}  # idle and held: the model was not asked, so it did not fail to advance; a failure is not a stall
STREAK_READ_CAP = 1000  # index records read back at most: a longer streak is counted as this long


def _of_a_task(record: dict) -> bool:
    """A cycle's record that can carry a streak (not a consolidation's, accepted or reverted: no task's
    cycle; nor another source's)."""
    return record.get("source", "index") == "index" and record.get("stop_reason") not in CONSOLIDATIONS


def has_work(task: Any, waiting: Any, plan: bool) -> bool:
    """Whether a cycle that left `task` current and `waiting` tasks queued was on a task that can stall."""
    return task is not None or (isinstance(waiting, int) and waiting > 0) or plan


def next_streak(carried: int, reason: str, resumed: bool, on_a_task: bool) -> int:
    """The streak a cycle leaves: `carried` (what the records before it left for its task), after a
    cycle that ended with `reason` (`resumed`: it applied `agent resume`; `on_a_task`: see has_work)."""
    if reason == StopReason.DONE.value:
        return 0
    base = 0 if resumed else carried
    return base if reason in NOT_COUNTED or not on_a_task else base + 1


def streak(records: list[dict], task: Any) -> int:
    """How many of the newest records (oldest first in `records`) ended `task` without done, in a row:
    the count back through records without a `streak` (an earlier release's), by their text."""
    return _counted_back(reversed(records), None, task)


def _counted_back(records: Iterable[dict], task_id: str | None, task: Any) -> int:
    count = 0
    for seen, (record, same) in enumerate(of_task(records, task_id or "", task)):
        if seen >= STREAK_READ_CAP:
            break
        if record.get("source", "index") != "index":
            continue
        if record.get("stop_reason") not in NOT_COUNTED:
            if record.get("stop_reason") == StopReason.DONE.value or not same:
                return count
            count += 1
        if record.get("resumed") is True:  # `agent resume`: the streak starts over from that cycle
            return count
    return count


def carried_streak(newest_first: Iterable[dict], task_id: str, task: Any) -> int:
    """The streak the records (given newest first, read lazily) leave for the task `task_id` (its text
    now: `task`): the newest record's `streak` when it is of the task (0 when it is of another), or
    for an earlier release's records, the count back."""
    records = iter(newest_first)
    for seen, record in enumerate(records):
        if seen >= STREAK_READ_CAP:
            return 0
        if not _of_a_task(record):
            continue
        if has_identity(record) and isinstance(record.get("streak"), int):
            return record["streak"] if record["task_id"] == task_id else 0
        return _counted_back(itertools.chain([record], records), task_id, task)  # read lazily, as far as it goes
    return 0


def record_streak(record: dict, older: Iterable[dict], plan: bool) -> int:
    """The streak a cycle's record leaves (its `streak`), from the records before it, newest first."""
    task_id = record.get("task_id_before") if isinstance(record.get("task_id_before"), str) else record["task_id"]
    carried = carried_streak(older, task_id, record.get("task_before"))
    on_a_task = has_work(record.get("task_after"), record.get("waiting"), plan)
    return next_streak(carried, str(record.get("stop_reason")), record.get("resumed") is True, on_a_task)


def judge(
    home: Home,
    settings: Settings,
    state: dict,
    reason: StopReason,
    secrets: Secrets,
    resumed: bool = False,
    task_id: str | None = None,
    task_before: Any = None,
) -> StopReason:
    """The cycle's stop reason: `reason`, or STALLED (with a note) when this cycle completes a stall.
    `resumed`: this cycle applied `agent resume`, so no earlier cycle counts; `task_id`: the identity
    the cycle woke with (None: as `status` would find it), `task_before`: its text at wake."""
    task = secrets.redact(state["current_task"])
    on_a_task = has_work(task, len(state.get("pending_actions") or []), settings.idle == "plan")
    if reason is StopReason.DONE or reason.value in NOT_COUNTED or not on_a_task:
        return reason
    try:  # the newest record, or for an earlier release's, as far back as the streak goes
        if task_id is None:
            task_before = task
            task_id = at_wake(newest_identified(newest_first(home)), task, "")
        earlier = 0 if resumed else carried_streak(newest_first(home), task_id, task_before)
    except AgentError:  # unreadable records must not cost the cycle its result; the save will say more
        return reason
    if earlier + 1 < settings.stall_cycles:
        return reason
    add_note(state, Tag.STOPPED.line(f"{StopReason.STALLED.value}: {stall_text(task, earlier + 1)}"))
    return StopReason.STALLED


def stall_text(task: Any, cycles: int) -> str:
    if task is None:
        return f"planning from the goals (no current task) has ended {cycles} cycles in a row without done"
    text = escape_controls(task)  # one line: a newline in the task would forge a note of its own
    shown = text if len(text) <= 200 else f"{text[:200]}..."  # a note, not a copy of the task
    return f"task '{shown}' has ended {cycles} cycles in a row without done"  # as written, never a repr


def stall_status(records: Iterable[dict], task: Any, stall_cycles: int, replaced: int | None = None) -> dict | None:
    """What `status` says of the current task's streak, from records given newest first (read lazily;
    `task`: the current task's text in active.yaml, `replaced`: as at wake); None when the last cycle ended it. The same
    count as the newest record's `streak` (the metrics and the hook's record), unless the operator
    changed the task since."""
    records = iter(records)
    newest = newest_identified(_peeked := _Peek(records))
    task_id = at_wake(newest, task, "", replaced)
    cycles = carried_streak(_peeked.replay(), task_id, task)
    if not cycles:
        return None
    same = newest is not None and task_id == identity_of(newest)
    held = same and newest.get("stop_reason") == StopReason.HELD.value and newest.get("held_for") == "stalled"
    return {
        "task": task,
        "task_id": task_id if same else None,
        "cycles": cycles,
        "stall_cycles": stall_cycles,
        "stalled": cycles >= stall_cycles,
        "text": stall_text(task, cycles),
        "held": newest.get("idle") if held else None,  # the held record's line: when it stalled, what waits
        "waiting": newest.get("waiting") if same else None,
    }


class _Peek:
    """An iterator whose items read so far can be read again (the records, read once from the database)."""

    def __init__(self, items):
        self.items, self.seen = items, []

    def __iter__(self):
        for item in self.items:
            self.seen.append(item)
            yield item

    def replay(self):
        yield from self.seen
        yield from self.items


class StallGate(Gate):
    """A cycle that completes a stall ends with `stalled` (exit 9) instead of its limit's reason."""

    def on_end(self, state: dict, reason: StopReason) -> StopReason:
        cycle = self.cycle
        woke = cycle.woke
        return judge(cycle.home, cycle.settings, state, reason, cycle.secrets, woke.resumed, woke.task_id, woke.task)
