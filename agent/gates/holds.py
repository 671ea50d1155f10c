"""Holds: a stuck home stops spending until something changes.

After a cycle that stalled (exit 9) or parked a call for the operator (exit 8), later cycles call
no model until something changes. Such a cycle is held: recorded like an idle one (one cycle
record, no snapshot pair, no log), with stop reason `held`, `held_for: stalled` or
`held_for: awaiting_approval`, and the exit code of what it waits on (9 or 8).

What the hold is judged against is the newest record that is not idle (read backwards, at most
`READ_CAP` records): a stalled or parked cycle, or a held one, which repeats what it holds after
(its digests, its incident's signature), so one record is read however long the hold lasts.
Any of these is a change, and the cycle runs:

- active.yaml is not the file that record left (its sha256, `active_digest`): a task edit, an
  `agent memory` edit, an inbox edit applied, a reset or restore, an edit by hand;
- the inbox applied something at this wake (an edit, a refusal noted, `agent resume`);
- a killed cycle left a call with side effects unfinished, which the model must be told of;
- wake_when printed something else than at the last wake (`wake_digest`);
- a call the operator approved or denied waits to be run or told; for a parked call, no call
  is pending any more.

`agent run --force` is never held. A record without digests (an older release's) is never held
after: the next stall records them.
"""

from __future__ import annotations

from typing import Iterable

from agent.common.outcomes import Held, StopReason
from agent.gates.base import Gate
from agent.scratchpad import file_digest
from agent.store.cycles import newest_first
from agent.store.db import any_rows
from agent.store.home import Home

HOLDING = (StopReason.STALLED, StopReason.AWAITING_APPROVAL)  # what a hold is for
READ_CAP = 1000  # records read back at most to find the newest that is not idle
CHANGES = "a task or memory edit, an inbox item, an approval or denial, new wake_when output, or `agent resume`"


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
    if woke.inbox:
        return "the inbox applied an edit"
    if woke.interrupted:
        return "a killed cycle left a call the model must be told of"
    if not isinstance(base.get("active_digest"), str) or file_digest(home.active) != base["active_digest"]:
        return "active.yaml changed"
    if woke.wake_digest is not None and woke.wake_digest != base.get("wake_digest"):
        return "wake_when printed something new"
    decided, pending = _decided_calls(home)
    if decided:
        return "the operator approved or denied a call"
    if reason is StopReason.AWAITING_APPROVAL and not pending:
        return "no call waits for the operator any more"
    return None


def held_text(base: dict, reason: StopReason) -> str:
    if reason is StopReason.AWAITING_APPROVAL:
        waits = base.get("signature") or "a parked call"
        return (
            f"held: {waits} awaits the operator (`agent approvals` lists it) and nothing else changed since "
            f"cycle {base.get('cycle_id')}; the model is not called until {CHANGES}"
        )
    return (
        f"held: the task stalled (cycle {base.get('cycle_id')}) and nothing changed since; the model is not "
        f"called until {CHANGES}"
    )


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
        raise Held(
            held_text(base, reason),
            reason,
            signature=base.get("signature"),
            repeated={key: base.get(key) for key in ("active_digest", "wake_digest")},
        )
