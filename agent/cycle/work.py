"""Work: the model's part of a cycle, on a copy of the state it woke with.

    the tools' context (with the call journal) and the preamble (rules.md with the tool list, the
        worked examples these tools allow); the loop is built whole, its time budget counting from here
    the gates' before_loop: approvals runs the calls the operator decided on, before the model is asked
    the model started; the notes the loop starts with (a plugin or MCP server left out, a killed cycle)
    the loop, until done or a limit (loop.py); a signal now raises at once
    the invariants: a state the runtime would refuse to load is never saved
    the gates judge how it ended (`on_end`: stalls)
    reflect, when it is on: after done; with sections, also after max_iterations or the time budget

Any failure (the model, a bug, a signal, a broken invariant) leaves the state as read plus one
failure note, and the traceback goes to the cycle's log.
"""

from __future__ import annotations

import copy
import traceback
from typing import TYPE_CHECKING

import agent.cycle.examples as worked
import agent.cycle.interrupts as interrupts
import agent.cycle.journal as journal
import agent.cycle.prompt as prompt
import agent.memory.queue_edits as queue
import agent.state as state_rules
from agent.after.failures import note_failure
from agent.after.report import killed_notes
from agent.common.outcomes import Interrupted, StopReason
from agent.common.tags import Tag
from agent.cycle.dispatch import dispatch
from agent.cycle.loop import Loop
from agent.gates.base import Tools
from agent.memory.builtin import Stamp, notes_left
from agent.memory.specs import Edits, Memory
from agent.models import ModelError
from agent.models.base import with_notices
from agent.scratchpad import state_size_problem
from agent.tools import ToolContext
from agent.tools.origins import Origins, entry_keys

if TYPE_CHECKING:
    from agent.after.report import CycleReport
    from agent.cycle.events import Step
    from agent.cycle.wake import Cycle, Woken
    from agent.models.base import Log, Model
    from agent.tools import Registry


def work(cycle: Cycle, woken: Woken, model: Model, registry: Registry, log: Log) -> tuple[dict, list, list]:
    """Run the loop on a copy of the woken state, have the gates judge how it ended, then reflect when
    that allows it: (the state to save, what left memory meanwhile: the notes reflect moved out, the
    entries that left a section; the provenance of the entries added). On any failure, the state as
    read plus a failure note, and nothing left."""
    before, report = woken.state, woken.report
    loop, archived = None, []
    try:
        if woken.signals.noted:  # arrived while waking or writing the before snapshot
            raise Interrupted(woken.signals.noted)
        with interrupts.raising():
            loop, state = _loop(cycle, woken, model, registry, log)
            loop.events.subscribe(lambda step: archived.extend(step.outcome.leaving))  # an update's leaving
            after, reason = loop.run(state)
            _check_invariants(before, after, loop.tools.ctx.memory)
    except (Exception, KeyboardInterrupt, Interrupted) as exc:
        loop, archived, (after, reason) = None, [], _failed(cycle, woken, exc, log)
    reason = woken.gates.on_end(after, reason)  # stalls judged before reflect: never reflect after a stall
    loop_after = after  # what the loop left: an entry added after it was reflect's
    if loop is not None:  # the notes' lines an update took out (a failed cycle's are the runtime's: its fold line)
        archived += notes_left(before, after, "replaced by the model")
    if loop is not None and cycle.settings.reflect and _reflects(reason, loop.tools.ctx.memory):
        try:
            with interrupts.raising():
                after, reflected, report.reflect = _reflect(cycle, loop, model, before, after, reason, log)
            archived += reflected
        except (Exception, KeyboardInterrupt, Interrupted) as exc:  # a signal while reflecting
            archived, (after, reason) = [], _failed(cycle, woken, exc, log)
    origins = loop.tools.ctx.origins if loop is not None else None
    added = _added(cycle, woken, loop_after, after) + _plain_added(woken, origins, loop_after, after)
    archived += _dropped(cycle, before, after, report)
    report.end(reason)
    return after, archived, [_with_origins(row, origins) for row in added]


def _added(cycle: Cycle, woken: Woken, loop_after: dict, after: dict) -> list:
    """The provenance rows of the section entries `after` holds that the state as read did not: by
    wake (the inbox's operator edits, hand-written entries adopted), the model in the loop, or reflect."""
    memory, cycle_id = Memory.of(cycle.settings), woken.report.cycle_id
    in_loop = {row[:2] for row in memory.added(woken.state, loop_after, cycle_id, "model")}
    rows = memory.added(woken.read, woken.state, cycle_id, "wake")
    for row in memory.added(woken.state, after, cycle_id, "model"):
        rows.append((*row[:3], "model" if row[:2] in in_loop else "reflect", row[4]))
    return rows


def _plain_added(woken: Woken, origins: Origins, loop_after: dict, after: dict) -> list:
    """The provenance rows of the plain entries (notes lines, completed tasks, the queue's tasks: keyed
    by text, agent/store/provenance.py) the inbox queued at wake, the model's updates wrote in the loop,
    or reflect wrote after it; the runtime's own lines (tagged notes, done's completed task) have none."""
    from agent.store.provenance import plain_entry_keys, queued_rows

    cycle_id = woken.report.cycle_id
    rows = queued_rows(woken.read, woken.state, cycle_id, "wake")
    if origins is None:  # the loop never ran
        return rows
    had, in_loop = plain_entry_keys(woken.state), plain_entry_keys(loop_after)
    reflected = woken.report.reflect == "applied"
    for key in sorted(plain_entry_keys(after) - had):
        if key in in_loop and origins.before(key) is not None:
            rows.append((*key, cycle_id, "model", {}))
        elif key not in in_loop and reflected:
            rows.append((*key, cycle_id, "reflect", {}))
    return rows


def _with_origins(row: tuple, origins: Origins) -> tuple:
    """A provenance row with where what the model had read came from (agent/tools/origins.py): before
    the update that first wrote it, for the loop's entries; all the cycle read, for reflect's."""
    section, entry_id, cycle_id, route, record = row
    if origins is None or route not in ("model", "reflect"):
        return row
    read = origins.before((section, entry_id)) if route == "model" else None
    return section, entry_id, cycle_id, route, {**record, "read": origins.so_far() if read is None else read}


def _dropped(cycle: Cycle, before: dict, after: dict, report: CycleReport) -> list:
    """What left the queue in this cycle without done (the model dropped, renamed or replaced it), and
    the goals the model dropped: said in a note the next prompt shows and in the record `status`
    reads; archived by the caller."""
    dropped = queue.dropped_tasks(before, after, after["completed_tasks"][len(before["completed_tasks"]) :])
    if dropped:
        state_rules.add_note(after, Tag.ARCHIVED.line(queue.dropped_line(dropped)))
        report.dropped_tasks = cycle.secrets.redact(dropped)
    goals = queue.dropped_goals(before, after)  # the operator's too: replaced by the model, never lost
    if goals:
        state_rules.add_note(after, Tag.ARCHIVED.line(queue.dropped_line(goals, noun="goal")))
        report.dropped_goals = cycle.secrets.redact(goals)
    by_model = "dropped by the model"
    return queue.queue_drops(dropped, by_model) + queue.queue_drops(goals, by_model, queue.DROPPED_GOAL)


def _failed(cycle: Cycle, woken: Woken, exc: BaseException, log: Log) -> tuple[dict, StopReason]:
    """A failed cycle's state (as read, plus the failure note) and stop reason; the traceback logged."""
    after = copy.deepcopy(woken.state)  # failed cycles count toward stalls
    note_failure(cycle.home, after, woken.report, woken.report.fail(exc, cycle.secrets), cycle.secrets)  # folded
    log(f"cycle failed: {woken.report.error}")
    if not isinstance(exc, ModelError):  # a bug's traceback; an HTTP error or a timeout is its line above
        log.block(traceback.format_exc())
    return after, StopReason.ERROR


def _check_invariants(before: dict, after: dict, sections: Edits) -> None:
    """A state the runtime would refuse to load, or one breaking a section's rules, is never saved."""
    broken = state_rules.invariant_problems(before, after) + [p for p in [state_size_problem(after)] if p]
    broken += sections.problems(after)
    if broken:
        raise state_rules.InvariantViolation("; ".join(broken))


# With operator sections, reflect (seed 000's second phase) follows a loop that ended on its own terms;
# never one that waits for the operator, stalled, spent a budget or failed. Without them: after done only.
REFLECTS_AFTER = (StopReason.DONE, StopReason.MAX_ITERATIONS, StopReason.TIME_BUDGET)
# After a time_budget stop, reflect may take this share of time_budget beyond it.
REFLECT_GRACE = 0.25


def _reflects(reason: StopReason, sections: Edits) -> bool:
    return reason in REFLECTS_AFTER if sections.specs else reason is StopReason.DONE


def _reflect(
    cycle: Cycle, loop: Loop, model: Model, before: dict, after: dict, reason: StopReason, log: Log
) -> tuple[dict, list, str]:
    """The reflect step (agent/memory/reflect.py, loaded only when a cycle reflects): (the state, what it
    moved out, its status)."""
    from agent.memory.reflect import reflect

    report, sections, seconds = loop.report, loop.tools.ctx.memory, loop.limits.seconds_left()
    if reason is StopReason.TIME_BUDGET and cycle.settings.time_budget is not None:
        seconds = max(seconds or 0.0, cycle.settings.time_budget * REFLECT_GRACE)
    return reflect(model, before, after, sections, report.usage, log, seconds, cycle.secrets)


def _loop(cycle: Cycle, woken: Woken, model: Model, registry: Registry, log: Log) -> tuple[Loop, dict]:
    """The loop of this cycle, built whole, and the state it starts from: what the gates run before
    the model is asked anything has run, and the notes the loop starts with are in it."""
    report, gates, secrets = woken.report, woken.gates, cycle.secrets
    ctx = ToolContext(
        cycle.home.root,
        cycle.settings,
        secrets,
        journal.Journal(cycle.home, report, secrets, log),
        memory=_sections(cycle, woken),
        origins=_origins(cycle, woken),
    )
    tools = Tools(registry, ctx, log, lambda state, reply: dispatch(state, reply, registry, ctx))
    preamble = worked.preamble(prompt.system_prompt(cycle.rules, registry), worked.offered(cycle.examples, registry))
    loop = Loop(model, tools, preamble, gates, report)  # its time budget counts all that follows
    state = gates.before_loop(copy.deepcopy(woken.state), tools)  # approvals: the calls the operator decided on
    model.start(with_notices(log, lambda text: cycle.progress("notice", text=text)))  # a slow first call, said
    for note in [Tag.TOOL_ERROR.line(p) for p in registry.problems] + killed_notes(woken.swept.killed):
        state_rules.add_note(state, note)  # a plugin or MCP server left out, a killed cycle: said where people look
    # the one sink of the loop's steps: the log line, the counts, the progress display
    loop.events.subscribe(lambda step: report.count(step.outcome.kind.action))
    loop.events.subscribe(lambda step: log(f"iteration {step.n}: {step.outcome.note}"))
    loop.events.subscribe(lambda step: _progress(cycle, step, report))
    if cycle.settings.otel:  # the trace is built from them once the home is released (agent/after/traces.py)
        loop.events.subscribe(report.steps.append)
    return loop, state


def _origins(cycle: Cycle, woken: Woken) -> Origins:
    """Where what the model reads in this cycle comes from, kept as the dispatcher runs each tool; the
    entries it writes are keyed by section and id (list sections) or by text (plain entries)."""
    from agent.store.provenance import plain_entry_keys, task_routes

    state = woken.state
    lists = [spec.name for spec in cycle.settings.section_specs if spec.is_list]
    asked = state["current_task"] or state["pending_actions"] or state["goals"]
    own = [route in MODELS_OWN for route in task_routes(cycle.home, state)] if asked else []
    operator = not all(own)  # a task or goal the model wrote itself is not the operator's input
    return Origins(cycle.home, woken.report.cycle_id, entry_keys(lists, plain_entry_keys), operator, any(own))


MODELS_OWN = ("model", "reflect")  # the provenance routes of what the model wrote


def _sections(cycle: Cycle, woken: Woken) -> Edits:
    """The cycle's memory sections as its updates apply them; the woken state (settled at wake)
    bounds what may leave each list in this cycle."""
    return Memory.of(cycle.settings).edits(woken.state, Stamp.of(woken.report.cycle_id))


def _progress(cycle: Cycle, step: Step, report: CycleReport) -> None:
    outcome = step.outcome.redacted(cycle.secrets)
    cycle.progress("iteration", n=step.n, max=cycle.settings.max_iterations, usage=report.usage, outcome=outcome)
