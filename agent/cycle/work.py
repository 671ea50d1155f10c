"""Work: the model's part of a cycle, on a copy of the state it woke with.

    the tools' context (with the call journal) and the preamble (rules.md with the tool list, the
        worked examples these tools allow); the loop is built whole, its time budget counting from here
    the gates' before_loop: approvals runs the calls the operator decided on, before the model is asked
    the model started; the notes the loop starts with (a plugin or MCP server left out, a killed cycle)
    the loop, until done or a limit (loop.py); a signal now raises at once
    the invariants: a state the runtime would refuse to load is never saved
    reflect, after done, when it is on

Any failure (the model, a bug, a signal, a broken invariant) leaves the state as read plus one
failure note, and the traceback goes to the cycle's log. Then the gates judge how it ended
(`on_end`: stalls).
"""

from __future__ import annotations

import copy
import traceback
from typing import TYPE_CHECKING

import agent.cycle.examples as worked
import agent.cycle.interrupts as interrupts
import agent.cycle.journal as journal
import agent.cycle.prompt as prompt
import agent.memory.bounding as memory
import agent.state as state_rules
from agent.after.report import killed_notes
from agent.common.outcomes import Interrupted, StopReason
from agent.common.tags import Tag
from agent.cycle.dispatch import dispatch
from agent.cycle.loop import Loop
from agent.gates.base import Tools
from agent.models import ModelError
from agent.models.base import with_notices
from agent.store.state_file import state_size_problem
from agent.tools import ToolContext

if TYPE_CHECKING:
    from agent.after.report import CycleReport
    from agent.cycle.events import Step
    from agent.cycle.wake import Cycle, Woken
    from agent.models.base import Log, Model
    from agent.tools import Registry


def work(cycle: Cycle, woken: Woken, model: Model, registry: Registry, log: Log) -> tuple[dict, list[memory.Archived]]:
    """Run the loop (and reflect) on a copy of the woken state: (the state to save, what reflect
    moved out of memory). On any failure, the state as read plus a failure note."""
    before, report = woken.state, woken.report
    try:
        if woken.signals.noted:  # arrived while waking or writing the before snapshot
            raise Interrupted(woken.signals.noted)
        with interrupts.raising():
            loop, state = _loop(cycle, woken, model, registry, log)
            after, reason = loop.run(state)
            broken = state_rules.invariant_problems(before, after) + [p for p in [state_size_problem(after)] if p]
            if broken:
                raise state_rules.InvariantViolation("; ".join(broken))
            archived: list[memory.Archived] = []
            if reason is StopReason.DONE and cycle.settings.reflect:
                after, archived, report.reflect = memory.reflect(
                    model, before, after, report.usage, log, loop.limits.seconds_left(), cycle.secrets
                )
    except (Exception, KeyboardInterrupt, Interrupted) as exc:
        after, archived, reason = copy.deepcopy(before), [], StopReason.ERROR  # failed cycles count toward stalls
        state_rules.add_note(after, report.fail(exc, cycle.secrets))
        log(f"cycle failed: {report.error}")
        if not isinstance(exc, ModelError):  # a bug's traceback; an HTTP error or a timeout is its line above
            log.block(traceback.format_exc())
    report.end(woken.gates.on_end(after, reason))
    return after, archived


def _loop(cycle: Cycle, woken: Woken, model: Model, registry: Registry, log: Log) -> tuple[Loop, dict]:
    """The loop of this cycle, built whole, and the state it starts from: what the gates run before
    the model is asked anything has run, and the notes the loop starts with are in it."""
    report, gates, secrets = woken.report, woken.gates, cycle.secrets
    ctx = ToolContext(cycle.home.root, cycle.settings, secrets, journal.Journal(cycle.home, report, secrets, log))
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
    return loop, state


def _progress(cycle: Cycle, step: Step, report: CycleReport) -> None:
    outcome = step.outcome.redacted(cycle.secrets)
    cycle.progress("iteration", n=step.n, max=cycle.settings.max_iterations, usage=report.usage, outcome=outcome)
