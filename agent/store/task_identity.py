"""A task's identity: which task a cycle worked on, whatever its wording. The runtime's, never the model's.

Each cycle's record carries `task_id_before` (the current task's identity at wake, the inbox
applied) and `task_id` (as the cycle left it). An identity is issued by the runtime and named for
the cycle that issued it: `<cycle id>` when a wake finds a task the operator put there,
`<cycle id>+done` when an accepted `done` advances the queue. Nothing in active.yaml holds it, so
the model can neither forge it nor reset it; the stall streak (agent/gates/stalls.py), the hold
(agent/gates/holds.py) and a stall's incident (agent/after/incidents.py) follow it.

How a rename is told from a new task: by who could have made the change.

- The model changes the state only inside a cycle, and that cycle's record keeps the current
  task's text as the cycle left it (`task_after`). Whatever the model writes in a cycle (the
  current task renamed, swapped with `pending_actions[0]`, cleared, the queue rewritten in any
  order), the identity stays the one the cycle woke with. Only an accepted `done` (its acceptance
  check passed, when the task has one) issues a new one: the queue advanced.
- Between cycles only the operator writes active.yaml (`agent task`, `agent memory`, the inbox,
  `reset`, `restore`, an edit by hand). At wake, a current task whose text is the newest record's
  `task_after` is the same task; any other text is the operator's change (the task edited,
  dropped or replaced): a new identity. So is a state `agent reset` or `agent restore` replaced
  since that record, whatever its text (each replaced state goes to the archive first: the record
  keeps the newest one's position, `replaced`), and so is a current task the operator dropped
  (`agent task drop 0` archives it, `dropped_task`): dropped and queued again with the same text,
  it is a retry, a new task. A task queued behind it changes nothing.
- No current task is an identity too: that of the time since the last accepted `done` or operator
  change (what an `idle: plan` home's model plans in, from the goals).

Records of an earlier release (no `task_id`) are compared by their text, as the streak always
was: such a record is of the task when its `task_after` is the text the task had when it crossed
the upgrade (the `task_before` of the oldest record of it that has an identity). A task that
crosses the upgrade unchanged keeps the identity its text gives (`text:<digest>`, `identity_of`),
so a stall's incident that spans the upgrade stays one incident.

Pure functions of records; reading them is the caller's.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Iterable, Iterator

READ_CAP = 1000  # records read back at most to find the newest that has an identity
DONE = "done"


def issued(cycle_id: str, event: str = "") -> str:
    """A new identity, issued by cycle `cycle_id` (at wake; or `event`: after an accepted done)."""
    return f"{cycle_id}+{event}" if event else cycle_id


CONSOLIDATIONS = ("consolidated", "consolidation_reverted")  # `agent consolidate`'s records: no task's cycle


def has_identity(record: dict) -> bool:
    return record.get("source", "index") == "index" and isinstance(record.get("task_id"), str)


def text_identity(task: Any) -> str:
    """The identity an earlier release's record has: its task's text's (the same text, the same task)."""
    text = json.dumps(task, ensure_ascii=False, default=str)
    return "text:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def identity_of(record: dict) -> str:
    """A record's task identity: its `task_id`, or for an earlier release's record its text's."""
    return record["task_id"] if isinstance(record.get("task_id"), str) else text_identity(record.get("task_after"))


def newest_identified(newest_first: Iterable[dict]) -> dict | None:
    """The newest cycle record that says which task it left, from records given newest first (at most
    READ_CAP read): one with an identity, or an earlier release's; a consolidation's is passed over."""
    for seen, record in enumerate(newest_first):
        if seen >= READ_CAP:
            return None
        if record.get("source", "index") != "index" or record.get("stop_reason") in CONSOLIDATIONS:
            continue
        return record
    return None


def at_wake(previous: dict | None, task: Any, cycle_id: str, replaced: int | None = None) -> str:
    """The identity of the current task `task` (its redacted text, as read at wake with the inbox
    applied), given `previous` (`newest_identified`) and `replaced` (the newest replaced state's
    position in the archive, agent/store/archive.py): the record's when `task` is the text that
    record left and no state was replaced since, else a new one issued by `cycle_id` (the operator
    changed it, or no cycle ran yet)."""
    seen = None if previous is None else previous.get("replaced")
    reset = isinstance(replaced, int) and isinstance(seen, int) and replaced > seen
    if previous is not None and previous.get("task_after") == task and not reset:
        return identity_of(previous)
    return issued(cycle_id)


def at_end(task_id_before: str, done: bool, cycle_id: str) -> str:
    """The identity a cycle leaves: a new one after an accepted done, else the one it woke with."""
    return issued(cycle_id, DONE) if done else task_id_before


def of_task(newest_first: Iterable[dict], task_id: str, task: Any) -> Iterator[tuple[dict, bool]]:
    """Each record (given newest first) with whether it is of the task `task_id` (whose text is
    `task` now): by its identity, or for an older release's record by its text (see above)."""
    text = task
    for record in newest_first:
        if has_identity(record):
            same = record["task_id"] == task_id
            if same:
                text = record.get("task_before", text)
            yield record, same
        else:
            yield record, record.get("task_after") == text
