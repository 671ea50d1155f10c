"""Stalls: the same task ending cycle after cycle without done.

A cycle that ends without done, on a task that has now ended `stall_cycles` cycles in a row
without done, stops with `stalled` (exit 9) instead of its limit's reason, so cron can alert.
The streak is read from the cycle records, newest first (each one's task_after and stop_reason),
plus the cycle now ending. Only cycles where the model worked on the task count:

- `done`, or another task, ends the streak;
- a failed cycle (exit 4: a prompt the endpoint refuses, the model unreachable, a bug: a stop
  reason in `FAILURES`) neither counts nor ends it: a failure stays a failure, so a home that
  cannot reach its model fails (exit 4) on every tick and `consecutive_failures` keeps counting,
  rather than turning an outage into a stall;
- one awaiting approval (exit 8), one whose budget was spent (exit 10), and idle and held cycles
  neither count nor end it: the model was not the one stuck, and exit 8/10 already tell the
  operator what to do;
- a cycle that applied `agent resume` counts and ends it: after a resume the task has a whole
  streak again.

After a stall, later cycles are held (agent/gates/holds.py) until something changes.
"""

from __future__ import annotations

from typing import Any, Iterable

from agent.common.outcomes import FAILURES, AgentError, StopReason
from agent.common.tags import Tag
from agent.config import Settings
from agent.gates.base import Gate
from agent.secrets import Secrets
from agent.state import add_note
from agent.store.cycles import newest_first
from agent.store.home import Home

NOT_COUNTED = {
    StopReason.AWAITING_APPROVAL.value,
    StopReason.BUDGET_EXHAUSTED.value,
    StopReason.IDLE.value,
    StopReason.HELD.value,
    StopReason.CONSOLIDATED.value,  # a consolidation is not a task's cycle: it neither counts nor ends a streak
    *(reason.value for reason in FAILURES),
}  # idle and held: the model was not asked, so it did not fail to advance; a failure is not a stall
STREAK_READ_CAP = 1000  # index records read back at most: a longer streak is counted as this long


def streak(records: list[dict], task: Any) -> int:
    """How many of the newest records (oldest first in `records`) ended `task` without done, in a row."""
    return streak_newest_first(reversed(records), task)[0]


def streak_newest_first(records: Iterable[dict], task: Any) -> tuple[int, bool]:
    """(the streak, whether a record ended it) from records given newest first, read lazily: no
    further back than the record that ends it, or `STREAK_READ_CAP` records."""
    count = 0
    for seen, record in enumerate(records):
        if seen >= STREAK_READ_CAP:
            break
        if record.get("source", "index") != "index":
            continue
        if record.get("stop_reason") not in NOT_COUNTED:
            if record.get("stop_reason") == StopReason.DONE.value or record.get("task_after") != task:
                return count, True
            count += 1
        if record.get("resumed") is True:  # `agent resume`: the streak starts over from that cycle
            return count, True
    return count, False


def judge(
    home: Home, settings: Settings, state: dict, reason: StopReason, secrets: Secrets, resumed: bool = False
) -> StopReason:
    """The cycle's stop reason: `reason`, or STALLED (with a note) when this cycle completes a stall.
    `resumed`: this cycle applied `agent resume`, so no earlier cycle counts."""
    task = secrets.redact(state["current_task"])
    if task is None or reason is StopReason.DONE or reason.value in NOT_COUNTED:
        return reason
    needed = settings.stall_cycles
    try:  # the records read newest first, only as far as the streak needs
        earlier = 0 if resumed else streak_newest_first(newest_first(home), task)[0]
    except AgentError:  # unreadable records must not cost the cycle its result; the save will say more
        return reason
    if earlier + 1 < needed:
        return reason
    add_note(state, Tag.STOPPED.line(f"{StopReason.STALLED.value}: {stall_text(task, earlier + 1)}"))
    return StopReason.STALLED


def stall_text(task: Any, cycles: int) -> str:
    shown = repr(task) if len(repr(task)) <= 200 else f"{repr(task)[:200]}..."  # a note, not a copy of the task
    return f"task {shown} has ended {cycles} cycles in a row without done"


def stall_status(records: Iterable[dict], task: Any, stall_cycles: int) -> dict | None:
    """What `status` says of the current task's streak, from records given newest first (read lazily);
    None when the last cycle ended it."""
    cycles = streak_newest_first(records, task)[0] if task is not None else 0
    if not cycles:
        return None
    return {
        "task": task,
        "cycles": cycles,
        "stall_cycles": stall_cycles,
        "stalled": cycles >= stall_cycles,
        "text": stall_text(task, cycles),
    }


class StallGate(Gate):
    """A cycle that completes a stall ends with `stalled` (exit 9) instead of its limit's reason."""

    def on_end(self, state: dict, reason: StopReason) -> StopReason:
        cycle = self.cycle
        return judge(cycle.home, cycle.settings, state, reason, cycle.secrets, cycle.woke.resumed)
