"""Incidents: what a person is told once, not on every tick.

An incident is one stop reason a person must act on (a failure, a parked call, a stall, a spent
budget: exit 4, 8, 9 or 10, and a reverted consolidation, a failure that exits 3) on one task with one error signature. A held cycle is part of the
incident it holds after. Its key, from a cycle's record alone:

    error (and every failure)   the stop reason, the task, the error with its numbers masked
    stalled                     the stop reason, the task's identity (agent/store/task_identity.py;
                                an earlier release's record: its text's, which the task keeps)
    awaiting_approval           the stop reason, the call (`call 3`: one incident per parked call)
    budget_exhausted            the stop reason, the budget and its period (one per UTC day or month)

An incident opens at the first cycle that has its key and lasts while the cycles after it have the
same key; idle cycles (no model asked) and accepted consolidations (no task's cycle) neither
continue nor end one. It clears at the first cycle
with another key or none. Nothing is kept but the records: whether a cycle is the first of its
incident that a channel reports (the line `--quiet` prints for cron mail; the `notify_on` hook) is
a pure function of its record and the records before it, read newest first as far as the incident
goes (at most `READ_CAP`).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Callable, Iterable

from agent.common.outcomes import ExitCode, StopReason, is_failure
from agent.store.task_identity import identity_of

# The exit codes of the outcomes a person must act on: the ones --quiet prints a line for.
ACT_ON = (ExitCode.FAILED, ExitCode.AWAITING_APPROVAL, ExitCode.STALLED, ExitCode.BUDGET_EXHAUSTED)
READ_CAP = 1000  # older records read at most to find where an incident began
SIGNATURE_CHARS = 300


def error_signature(error: Any) -> str:
    """An error as one incident sees it: one line, numbers with a point or of 4 digits or more and
    words of 8 characters or more holding a digit (durations, ids, ports, times) masked, clipped."""
    text = " ".join(str(error or "").split())
    text = re.sub(r"\b(?=[A-Za-z_-]*\d)[\w-]{8,}\b", "#", text)
    text = re.sub(r"\d+\.\d+|\d{4,}", "#", text)
    return text[:SIGNATURE_CHARS]


def _reason(record: dict) -> str | None:
    reason = record.get("stop_reason")
    return record.get("held_for") if reason == StopReason.HELD.value else reason


def incident_key(record: dict) -> str | None:
    """The key of the incident a cycle's record is part of (16 hex digits), or None: none."""
    reason = _reason(record)
    if record.get("source", "index") != "index":
        return None
    if record.get("exit_code") not in ACT_ON and not is_failure(reason):  # a reverted consolidation exits 3
        return None
    if is_failure(reason):
        parts = [reason, record.get("task_after"), error_signature(record.get("error"))]
    elif reason == StopReason.STALLED.value:  # the task, however the model words it
        parts = [reason, identity_of(record)]
    else:  # awaiting_approval, budget_exhausted: the call, the budget and its period
        parts = [reason, record.get("signature")]
    text = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _idle(record: dict) -> bool:
    """Passed over: neither part of an incident nor its end (no task's cycle: idle, a consolidation accepted)."""
    passed = (StopReason.IDLE.value, StopReason.CONSOLIDATED.value)
    return record.get("stop_reason") in passed or record.get("source", "index") != "index"


def incident_run(older: Iterable[dict], key: str | None) -> list[dict]:
    """The records before a cycle (given newest first) that are part of incident `key`, newest first:
    back to the first record of another incident or none (idle records are passed over)."""
    run: list[dict] = []
    if key is None:
        return run
    for seen, record in enumerate(older):
        if seen >= READ_CAP:
            break
        if _idle(record):
            continue
        if incident_key(record) != key:
            break
        run.append(record)
    return run


def act_on(record: dict) -> bool:
    """Whether a record is an outcome --quiet prints a line for (held cycles: what they wait on)."""
    return record.get("exit_code") in ACT_ON


def first_to_report(record: dict, run: list[dict], reports: Callable[[dict], bool]) -> bool:
    """Whether `record` is the first of its incident that a channel `reports` (e.g. the notify_on
    filter): it reports it, and none of the earlier records of its incident (`run`) did. A record
    with no incident: whether the channel reports it at all."""
    return reports(record) and not any(reports(r) for r in run)


def open_incident(newest_first: Iterable[dict]) -> dict | None:
    """The incident open now, from the records newest first (None: the newest cycle that was not idle
    had none): {key, stop_reason, held, task, signature, error, since (its first cycle id), cycles,
    last}, for `agent status`."""
    records = iter(newest_first)
    newest = next((r for _, r in zip(range(READ_CAP), records) if not _idle(r)), None)
    key = None if newest is None else incident_key(newest)
    if key is None:
        return None
    run = [newest, *incident_run(records, key)]
    reason = _reason(newest)
    return {
        "key": key,
        "stop_reason": reason,
        "held": newest.get("stop_reason") == StopReason.HELD.value,
        "task": newest.get("task_after"),
        "signature": newest.get("signature"),
        "error": next((r.get("error") for r in run if r.get("error")), None),
        "since": run[-1].get("cycle_id"),
        "cycles": len(run),
        "last": newest.get("cycle_id"),
    }


def incident_text(incident: dict) -> str:
    """One line for a person: what the open incident is, since when, how many cycles."""
    reason, since, cycles = incident["stop_reason"], incident["since"], incident["cycles"]
    if is_failure(reason):
        what = f"failing: {error_signature(incident['error']) or reason}"
    elif reason == StopReason.STALLED.value:
        what = f"stalled on task {json.dumps(incident['task'], ensure_ascii=False)}"
    elif reason == StopReason.AWAITING_APPROVAL.value:
        what = f"{incident['signature'] or 'a call'} awaits the operator"
    else:
        what = f"{reason}: {incident['signature'] or 'a budget is spent'}"
    held = "; held: no model is called until something changes" if incident["held"] else ""
    return f"{what} (since cycle {since}, {cycles} cycle(s){held})"
