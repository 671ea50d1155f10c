"""The model loop of one cycle, shaped like mini-swe-agent's agent: `run` calls `step` until an
exception says why it stops, and `step` is `query` (prompt -> model) then `execute` (each action
through the dispatcher).

    Done          the model's `done` was accepted                  stop reason done
    Parked        a gated call was parked for the operator         awaiting_approval (a LimitReached)
    LimitReached  Limits said enough: iterations, tokens, time...  its stop reason

Each action is one `Step` event (events.py); the next request carries its Outcome as
`Request.previous`, so nothing is read back out of the notes.
"""

from __future__ import annotations

from typing import Callable

import agent.cycle.examples as worked
import agent.cycle.prompt as prompt
from agent.after.report import CycleReport
from agent.common.outcomes import Done, LimitReached, StopReason
from agent.common.tags import Outcome, Tag
from agent.cycle.dispatch import dispatch
from agent.cycle.events import Events, Step
from agent.cycle.limits import Limits
from agent.models import Completion, Model, Request
from agent.state import add_note
from agent.tools import Registry, ToolContext


class Loop:
    """Prompt -> model -> dispatcher over one state, built whole before the first step."""

    def __init__(
        self,
        state: dict,
        model: Model,
        registry: Registry,
        ctx: ToolContext,
        system: str,
        examples: list[dict],
        report: CycleReport,
        limits: Limits,
        events: Events,
        log: Callable[[str], None],
        park: Callable[[dict, Outcome], None],
    ):
        self.state, self.model, self.registry, self.ctx = state, model, registry, ctx
        self.settings, self.secrets = ctx.settings, ctx.secrets
        self.system = system  # byte-stable across iterations and cycles, as the examples are: prompt caches hit
        self.examples, self.examples_text = worked.turns(examples), worked.section(examples)
        # a model is sent the turns or the text: the prompt is fitted with room for the larger
        turn_bytes = sum(len(user.encode()) + len(reply.encode()) for user, reply in self.examples)
        self.examples_bytes = max(turn_bytes, len(self.examples_text.encode()))
        self.schema = registry.action_schema()
        self.report, self.limits, self.events, self.log = report, limits, events, log
        self.park = park  # records a gated call and raises Parked
        self.previous: Outcome | None = None  # what the last action did (redacted); None before the first

    def run(self) -> tuple[dict, StopReason]:
        """Step until done or a limit: the state and the stop reason."""
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
        """One request to the model, after the limits allow it."""
        limits, report = self.limits, self.report
        limits.before_call()
        n = report.iterations = report.iterations + 1
        shown = self.secrets.redact(self.state)  # what the model sees, and what guidance may offer it
        user = prompt.fitted_user_prompt(
            self.system, shown, n, self.settings, limits.warnings(), self.previous, self.examples_bytes
        )
        report.prompt_bytes.append(len(self.system.encode()) + len(user.encode()))
        self.log(f"iteration {n}: prompt {report.prompt_bytes[-1]} bytes")
        request = Request(
            self.system,
            user,
            self.schema,
            task=shown["current_task"] or None,
            previous=self.previous,
            timeout=limits.seconds_left(),
            examples=self.examples,
            examples_text=self.examples_text,
        )
        completion = limits.timed(self.model.complete, request)
        report.usage.add(completion.usage)
        limits.count_tokens(completion.usage.total_tokens)
        reply = self.secrets.redact_text(completion.shown)[:2000]  # redacted before the cut: no half key
        self.log(f"iteration {n}: reply {reply!r} usage {completion.usage}")
        return completion

    def execute(self, completion: Completion) -> None:
        """The reply's text, or each native call in turn: one action each, one event each."""
        for action in completion.replies():
            self.state, outcome = dispatch(
                self.state, action, self.registry, self.ctx, completion.cut_at, completion.schema
            )
            self.events.emit(Step(self.report.iterations, outcome))
            if outcome.kind is Tag.APPROVAL:  # raises Parked: later calls never run
                self.park(self.state, outcome)
            if outcome.done:
                raise Done
            self.limits.after_reply(outcome.tool, outcome.args, outcome.kind is Tag.PARSE_ERROR)
            self.previous = outcome.redacted(self.secrets)
