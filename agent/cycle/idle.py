"""Idle cycles: a cycle with nothing to do calls no model and writes almost nothing.

At wake, under the lock, once the inbox is applied, `wake` decides whether the cycle runs:

- `wake_when` set (and no `agent run --force`): the operator's command decides. It runs like
  on_cycle_end (argv, no shell, from the home, in its own session, secrets scrubbed from its
  environment, killed with its group at `hook_timeout`). Exit 0: the cycle runs, and the start of
  what it printed on stdout (redacted, one line, control characters escaped) is a [WAKE] note
  in the state the cycle starts from, so the model sees what happened, and the sha256 of that
  output is the record's `wake_digest` (a held home runs again when it differs). Any other ending
  (an exit code, a timeout, a program not found): idle.
- otherwise the state decides: no current task, an empty queue, nothing applied from the inbox,
  no approved or denied call waiting to be run or told, and no interrupted call to tell (see
  journal.py): idle; with `idle: plan` a state that has goals runs, so the model plans from them;
  with `idle: run` every cycle runs.

An idle cycle (`record`) takes an id and appends one index record (stop reason `idle`, exit 0),
then writes the metrics and runs on_cycle_end as any cycle does. It writes no snapshot pair, no
cycle log and no transcript, leaves active.yaml as it is and prunes nothing (it added nothing).
A cycle a gate holds at wake (agent/gates/holds.py) is recorded the same way, with stop reason
`held` and the exit code of what it waits on.
"""

from __future__ import annotations

import hashlib
import time
from typing import Callable

import agent.cycle.journal as journal
from agent.after.aftercare import after_cycle
from agent.after.report import CycleReport
from agent.common.outcomes import Held, InvalidScratchpad, StopReason
from agent.common.tags import Tag
from agent.config import Settings
from agent.gates.base import Woke
from agent.gates.holds import memory_digest
from agent.memory.builtin import Stamp
from agent.memory.inbox import Applied, apply_inbox
from agent.memory.specs import Memory
from agent.secrets import Secrets
from agent.state import add_note
from agent.store import task_identity
from agent.store.archive import newest_replaced
from agent.store.cycles import newest_first
from agent.store.db import any_rows
from agent.store.home import Home

# The most bytes of the wake_when command's stdout given to the model (the start of it).
WAKE_OUTPUT_BYTES = 2000
NOTHING_TO_DO = "nothing to do: no current task, an empty queue, nothing in the inbox"


def wake(
    home: Home, settings: Settings, state: dict, report: CycleReport, force: bool, secrets: Secrets
) -> tuple[dict, str | None, Woke]:
    """Apply the inbox to `state` (read from active.yaml) and decide: (the state the cycle starts
    from, None, what wake found) when it runs, or (that state, why it is idle, what wake found) when
    no model is to be called. Sets the report's task_before, resumed and wake_digest."""
    context = Memory.of(settings).edit_context(home, Stamp.of(report.cycle_id))  # a queued memory edit's
    applied = apply_inbox(home, state, context, secrets)
    state, report.resumed = applied.state, applied.resumed
    report.task_before = secrets.redact(state["current_task"])
    _identify(home, report, secrets.redact(state))
    state, why = _decide(home, settings, state, report, force, secrets, applied)
    interrupted = any(call.get("status") == journal.INTERRUPTED for call in report.calls)
    woke = Woke(
        report.wake_digest,
        applied.resumed,
        interrupted,
        force,
        report.task_id_before,
        report.task_before,
        report.memory_digest,
    )
    return state, why, woke


def _identify(home: Home, report: CycleReport, state: dict) -> None:
    """The current task's identity at wake (from the newest record that has one: its text then and
    now), the tasks waiting behind it and what a hold compares; an idle or held cycle leaves them so."""
    report.replaced = newest_replaced(home)
    report.task_id_before = report.task_id = task_identity.at_wake(
        task_identity.newest_identified(newest_first(home)), report.task_before, report.cycle_id, report.replaced
    )
    report.waiting = len(state["pending_actions"])
    report.memory_digest = memory_digest(state)


def _decide(
    home: Home, settings: Settings, state: dict, report: CycleReport, force: bool, secrets: Secrets, applied: Applied
) -> tuple[dict, str | None]:
    if settings.wake_when and not force:
        from agent.after.hooks import run_command  # here, not at the top: only a home with wake_when runs one

        env = {**secrets.child_env(), "AGENT_HOME": str(home.root), "AGENT_CYCLE_ID": report.cycle_id}
        try:
            problem, output = run_command(
                list(settings.wake_when),
                home.root,
                settings.hook_timeout,
                b"",
                env,
                stdout_only=True,
                keep=WAKE_OUTPUT_BYTES,
                head=True,
            )
        except Exception as exc:  # whatever it is, it did not say yes
            problem, output = f"could not run: {type(exc).__name__}: {exc}", ""
        if problem is not None:
            return state, f"wake_when: {settings.wake_when[0]}: {problem}"
        report.wake_digest = hashlib.sha256(output.encode("utf-8", "surrogatepass")).hexdigest()
        state = dict(state)
        add_note(state, wake_note(output, secrets))
    elif not (force or applied.messages or applied.refused or _has_work(home, settings, state)):
        return state, NOTHING_TO_DO
    return journal.note_interrupted(home, settings, state, report), None


def wake_note(output: str, secrets: Secrets) -> str:
    """The [WAKE] note: the command's output as one line, redacted (add_note escapes it)."""
    text = "; ".join(line.strip() for line in secrets.redact_text(output).splitlines() if line.strip())
    return Tag.WAKE.line(f"wake_when: {text}" if text else "wake_when exited 0")


def _has_work(home: Home, settings: Settings, state: dict) -> bool:
    if (
        settings.idle == "run"
        or state["current_task"]
        or state["pending_actions"]
        or (settings.idle == "plan" and state["goals"])
    ):
        return True
    if journal.unfinished(home):
        return True
    if not any_rows(home, "approval"):  # nothing was ever parked: agent/gates/approvals.py is not imported
        return False
    from agent.gates.approvals import APPROVED, DENIED, read_approvals

    try:  # a call the operator approved runs, and one denied is told, before the model is asked anything
        return any(
            r["status"] == APPROVED or (r["status"] == DENIED and r["handled_in"] is None) for r in read_approvals(home)
        )
    except InvalidScratchpad:  # the cycle reports it (exit 6)
        return True


def record(
    home: Home,
    settings: Settings,
    report: CycleReport,
    why: str | Held,
    started: float,
    secrets: Secrets,
    report_event: Callable[..., None],
) -> CycleReport:
    """End `report` as an idle cycle (`why`: its reason), or a held one (`why`: the gate's Held): its
    index record, metrics and hook; nothing else is written."""
    if isinstance(why, Held):
        report.held(why, secrets)
    else:
        report.end(StopReason.IDLE)
        report.idle = why
    report.task_after, report.duration_s = report.task_before, time.monotonic() - started
    after_cycle(home, settings, report, secrets, lambda _line: None, prune=False)
    report_event("end", report=report)
    return report
