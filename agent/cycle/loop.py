"""The model loop of one cycle, shaped like mini-swe-agent's agent: `run` calls `step` until an
exception says why it stops, and `step` is `query` (prompt -> model) then `execute` (each action
through the dispatcher).

    Done          the model's `done` was accepted                       stop reason done
    Parked        a gate held a call for the operator (approvals)       awaiting_approval (a LimitReached)
    LimitReached  Limits or a gate said enough: iterations, budgets...  its stop reason

All three are a `Stop` (agent/common/outcomes.py), the family every limit and gate raises.

Each action is one `Step` event (events.py); the next request carries its Outcome as
`Request.previous`, so nothing is read back out of the notes.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import agent.cycle.prompt as prompt
from agent.common.outcomes import Done, LimitReached, StopReason
from agent.common.tags import Outcome, Tag
from agent.cycle.dispatch import dispatch
from agent.cycle.events import Events, Step
from agent.cycle.limits import Limits
from agent.models import Completion, Request
from agent.models.base import ToolCall
from agent.state import add_note

if TYPE_CHECKING:
    from agent.after.report import CycleReport
    from agent.cycle.prompt import Preamble
    from agent.gates.base import Gate, Tools
    from agent.models import Model


class Loop:
    """Prompt -> model -> dispatcher, built whole before the first step, then `run` over one state.

    The loop keeps its limits (limits.py) and its events (events.py: subscribe before `run`); the
    cycle's gates are asked before each model call, before each action is applied (through the
    dispatcher) and once each outcome is known."""

    def __init__(self, model: Model, tools: Tools, preamble: Preamble, gates: Gate, report: CycleReport):
        self.model, self.tools, self.preamble, self.gates, self.report = model, tools, preamble, gates, report
        self.settings, self.secrets, self.log = tools.ctx.settings, tools.ctx.secrets, tools.log
        self.limits = Limits(self.settings)
        self.events = Events()
        self.schema = tools.registry.action_schema()
        self.state: dict = {}
        self.previous: Outcome | None = None  # what the last action did (redacted); None before the first

    def run(self, state: dict) -> tuple[dict, StopReason]:
        """Step from `state` until done or a limit: the state and the stop reason."""
        self.state = state
        try:
            while True:
                self.step()
        except Done:
            return self.state, StopReason.DONE
        except LimitReached as stop:
            self.log(f"stopped: {self.report.stopped_by(stop, self.secrets)}")
            add_note(self.state, Tag.STOPPED.line(f"{stop.reason.value}: {stop}"))
            return self.state, stop.reason

    def step(self) -> None:
        self.execute(self.query())

    def query(self) -> Completion:
        """One request to the model, after the limits and the gates allow it."""
        limits, report, preamble = self.limits, self.report, self.preamble
        limits.before_call()
        self.gates.before_call(report.usage)
        n = report.iterations = report.iterations + 1
        shown = self.secrets.redact(self.state)  # what the model sees, and what guidance may offer it
        user = prompt.fitted_user_prompt(
            preamble.system, shown, n, self.settings, limits.warnings(), self.previous, preamble.examples_bytes
        )
        report.prompt_bytes.append(len(preamble.system.encode()) + len(user.encode()))
        self.log(f"iteration {n}: prompt {report.prompt_bytes[-1]} bytes")
        request = Request(
            preamble.system,
            user,
            self.schema,
            task=shown["current_task"] or None,
            previous=self.previous,
            timeout=limits.seconds_left(),
            examples=preamble.examples,
            examples_text=preamble.examples_text,
        )
        completion = limits.timed(self.model.complete, request)
        report.usage.add(completion.usage)
        limits.count_tokens(completion.usage.total_tokens)
        reply = self.secrets.redact_text(completion.shown)[:2000]  # redacted before the cut: no half key
        self.log(f"iteration {n}: reply {reply!r} usage {completion.usage}")
        return completion

    def execute(self, completion: Completion) -> None:
        """The reply's text, or each native call in turn: one action each, one event each."""
        registry, ctx = self.tools.registry, self.tools.ctx
        for action in completion.replies():
            began_ns = time.time_ns()
            self.state, outcome = dispatch(
                self.state, action, registry, ctx, completion.cut_at, completion.schema, self.gates
            )
            call_id = action.id if isinstance(action, ToolCall) else None
            self.events.emit(Step(self.report.iterations, outcome, call_id, began_ns, time.time_ns()))
            self.gates.after_action(self.state, outcome)  # approvals: a held call is parked (Parked)
            if outcome.done:
                raise Done
            self.limits.after_reply(outcome.tool, outcome.args, outcome.kind is Tag.PARSE_ERROR)
            self.previous = outcome.redacted(self.secrets)
