"""Applying the inbox: operator edits queued while a cycle ran, applied in order at the next wake.

Called under the home's lock with the state just read from active.yaml: by the cycle (before
its `_before` snapshot, so the snapshot is exactly what the cycle works from) and by every
operator command that changes the state. The edits are applied in the order they were queued;
one that cannot be applied (drop 5 of 3 tasks, a task too large to save) becomes an [INBOX] note
instead and is not retried.

The inbox is the `inbox` rows of logs/agent.db: `agent task add` (and the like) queues an edit there
when a cycle holds the home's lock. Crash safety (only this, under the home's lock, deletes rows,
and only those it read: none queued meanwhile is lost):
  1. read the records up to the newest row; skip those whose ids active.yaml lists under
     `inbox_applied`; apply them; commit what memory edits moved out of a section to the archive
     (a kill after it leaves that archived and still held: readers skip such a record);
  2. in one write transaction of the database (no edit is queued meanwhile), write active.yaml
     with the edits applied and `inbox_applied: [their ids]` (atomic), delete the records read,
     and commit.
A kill before active.yaml is written leaves the old active.yaml and every record: they are applied
next time (what step 1 archived may be archived again: a duplicate, never a loss). A kill after it, before
the commit, leaves records that `inbox_applied` names: they are skipped, never applied twice. The marker is dropped from the state handed back, so the next save of active.yaml (the
cycle's, or the command's) removes it; the model never sees it.
"""

from __future__ import annotations

import copy
import datetime as _dt
import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable

from agent.common.files import fault_point
from agent.common.outcomes import UsageError
from agent.common.tags import Tag
from agent.memory.queue_edits import EditContext, apply_edit, describe
from agent.scratchpad import state_size_problem, write_state
from agent.state import add_note
from agent.store.db import any_rows, records
from agent.store.home import Home
from agent.store.rows import loaded

# The top-level key of active.yaml naming the ids of the last batch applied (see above).
APPLIED_KEY = "inbox_applied"


@dataclass
class Applied:
    state: dict  # the state with the queued edits applied, without the marker
    messages: list[str] = field(default_factory=list)  # what each applied edit did (`agent resume` aside)
    refused: list[str] = field(default_factory=list)  # the [INBOX] notes of edits not applied
    resumed: bool = False  # an `agent resume` was among the edits applied


def without_marker(state: dict) -> dict:
    return {k: v for k, v in state.items() if k != APPLIED_KEY}


def _applied_ids(state: dict) -> set[str]:
    ids = state.get(APPLIED_KEY)
    return {i for i in ids if isinstance(i, str)} if isinstance(ids, list) else set()


def queue_edit(home: Home, edit: dict) -> dict:
    """Queue one edit with a fresh id and the time; returns the record written."""
    record = {
        "id": os.urandom(8).hex(),
        "queued": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        **edit,
    }
    db = records(home)
    with db.write():
        db.execute("INSERT INTO inbox (format, record) VALUES (1, ?)", (json.dumps(record, ensure_ascii=False),))
    return record


def queued_edits(home: Home, last: int | None = None) -> list[dict]:
    """The queued edits, oldest first (those up to row `last` only, when given)."""
    rows = records(home, create=False).rows(
        "SELECT record FROM inbox WHERE ? IS NULL OR seq <= ? ORDER BY seq", (last, last)
    )
    return [record for (text,) in rows if (record := loaded(text)) is not None and "id" in record]


def apply_inbox(home: Home, state: dict, context: EditContext | None = None, secrets: Any = None) -> Applied:
    """Apply every queued edit to `state` (read from active.yaml under the home's lock), save the
    result, empty the inbox. With nothing queued, nothing is written. A memory edit needs `context`
    (the sections, the stamp); what memory edits move out of a section is archived (redacted by
    `secrets`) before active.yaml is written."""
    result = Applied(without_marker(state))
    if not any_rows(home, "inbox"):
        return result
    context, db = context or EditContext(), records(home)
    last = db.one("SELECT max(seq) FROM inbox")[0]  # only what is read now is deleted below
    already = _applied_ids(state)
    fresh = [r for r in queued_edits(home, last) if not (isinstance(r["id"], str) and r["id"] in already)]
    for record in fresh:
        _apply_one(result, record, context)
    archive_operator_leaving(home, context, secrets)
    with db.write():  # no edit is queued while active.yaml is written and the rows read deleted
        if fresh:
            write_state(
                home.active, {**result.state, APPLIED_KEY: [r["id"] for r in fresh if isinstance(r["id"], str)]}
            )
        fault_point("inbox: before emptying")
        db.execute("DELETE FROM inbox WHERE seq <= ?", (last,))
    fault_point("inbox: emptied")
    return result


def discard_queued(home: Home, before_emptying: Callable[[list[dict]], None] = lambda records: None) -> list[dict]:
    """Empty the inbox; the records it held (`agent reset`: they were meant for the replaced memory).
    `before_emptying(records)` runs in the same transaction, before the records are deleted (even
    when there are none), so whatever it keeps of them cannot miss one queued meanwhile."""
    if not any_rows(home, "inbox"):
        before_emptying([])
        return []
    db = records(home)
    with db.write():
        last = db.one("SELECT max(seq) FROM inbox")[0]
        queued = queued_edits(home)
        before_emptying(queued)
        db.execute("DELETE FROM inbox WHERE seq <= ?", (last,))
    return queued


def archive_operator_leaving(home: Home, context: EditContext, secrets: Any) -> None:
    """Archive what the operator's memory edits moved out of a section, and each current task a
    `task drop 0` dropped (then forget them), before the state that lost them is written. A dropped
    task's row is also what tells the next wake that the operator changed the current task, even
    when the same text is queued again (agent/store/task_identity.py)."""
    if not (context.dropped or context.leaving):
        return
    from agent.secrets import Secrets
    from agent.store.archive import DROPPED_TASK, Left, archive

    stamp = context.stamp.cycle if context.stamp is not None else "operator"
    dropped = [Left(DROPPED_TASK, task, "agent task drop 0") for task in context.dropped]
    archive(home, [*dropped, *context.leaving], stamp, secrets or Secrets())
    context.dropped.clear()
    context.leaving.clear()


def _apply_one(result: Applied, record: dict, context: EditContext) -> None:
    candidate, kept, dropped = copy.deepcopy(result.state), len(context.leaving), len(context.dropped)
    try:
        if not isinstance(record["id"], str):
            raise UsageError("the record's id is not text")
        message = apply_edit(candidate, record, context)
        too_large = state_size_problem(candidate)
        if too_large:
            raise UsageError(too_large)
    except UsageError as exc:
        del context.leaving[kept:]  # the edit is not applied: nothing of it leaves
        del context.dropped[dropped:]
        note = Tag.INBOX.line(f"queued edit not applied: {describe(record)[:200]}: {exc}")
        add_note(result.state, note)
        result.refused.append(note)
        return
    result.state = candidate
    if record.get("op") == "resume":  # changes nothing by itself: it only lets a held home run (holds.py)
        result.resumed = True
    else:
        result.messages.append(message)
