"""The one interface of a gate: something that may stop, hold or refuse what a cycle does.

A gate is made for one cycle, under the lock once the cycle has its id and is to run (`Gate(cycle)`,
from a `GateContext`), and told of the cycle at fixed points. Every hook does nothing unless the
gate overrides it, so a gate is only the hooks it needs:

    hook          when                                        what it may do
    check         before the lock (a classmethod)             raise UsageError: exit 2, nothing read or written
    at_wake       the inbox is applied, no model asked yet    raise Held: this cycle calls no model (held)
    before_loop   the tools are open, before the first call   run calls, add notes: the state the loop starts from
    before_call   before each model call                      raise LimitReached: nothing more is sent
    on_action     a valid call, before it is applied          return why not (a [TOOL ERROR]); raise NeedsApproval
    after_action  the call's outcome is known                 raise a Stop (Parked, LimitReached)
    on_done       `done`, before it is accepted               return why not (a [CHECK FAILED]: the loop goes on)
    on_end        the loop and reflect are over, unsaved      return the cycle's stop reason

A gate stops a cycle by raising one family of exceptions (`Stop` in agent/common/outcomes.py: `Held`,
`LimitReached`, `Parked`); the loop and the cycle decide what each means. A hook may add notes to
the state it is given (`agent.state.add_note`).

`Gates` is a list of gates that is itself a gate: each hook asks every gate in turn, in the order of
`GATES` (agent/gates/registry.py, where a gate is listed, with when a cycle has it).
"""

from __future__ import annotations

import datetime as _dt
from typing import TYPE_CHECKING, Callable, NamedTuple

from agent.common.outcomes import StopReason

if TYPE_CHECKING:
    from agent.common.tags import Outcome
    from agent.config import Settings
    from agent.models.base import Model, Usage
    from agent.secrets import Secrets
    from agent.store.home import Home
    from agent.tools import Registry, Tool, ToolContext


class Woke(NamedTuple):
    """What the cycle's wake found that a gate may weigh (agent/cycle/idle.py)."""

    wake_digest: str | None = None  # sha256 of what wake_when printed when it said yes; None: it did not run
    resumed: bool = False  # `agent resume` was among it
    interrupted: bool = False  # a killed cycle left a call with side effects unfinished (journal.py)
    forced: bool = False  # `agent run --force`
    task_id: str | None = None  # the current task's identity at wake (agent/store/task_identity.py)
    task: str | None = None  # the current task's text at wake (redacted)
    memory_digest: str | None = None  # what the hold compares: the state at wake but the queue (holds.py)


class GateContext(NamedTuple):
    """What a gate may know of the cycle it guards."""

    home: Home
    settings: Settings
    secrets: Secrets  # the cycle's one Secrets
    model: Model  # the model the cycle starts with (a FallbackModel: all of them)
    cycle_id: str
    now: _dt.datetime  # when the cycle started (UTC)
    woke: Woke = Woke()


class Tools(NamedTuple):
    """The cycle's tools, as the loop and `before_loop` see them: the registry offered to the model,
    the context calls run in, the cycle's log, and `run`, which applies one reply through the tools
    alone, no gate asked (how an approved call runs as it was parked)."""

    registry: Registry
    ctx: ToolContext
    log: Callable[[str], None]
    run: Callable[[dict, str], tuple[dict, Outcome]]


class Action(NamedTuple):
    """A call the model asked for, valid for its tool (arguments redacted), before it is applied."""

    tool: Tool
    args: dict
    ctx: ToolContext
    after: dict | None = None  # the state it would leave, where that is known before it runs (update_scratchpad)


class Gate:
    """One gate: every hook does nothing until a gate overrides it (see the module's docstring)."""

    def __init__(self, cycle: GateContext):
        self.cycle = cycle

    @classmethod
    def check(cls, settings: Settings, model_name: str) -> None:
        """Before the lock: raise UsageError (exit 2) for settings this gate cannot work with."""

    def at_wake(self, state: dict) -> None:
        """Raise Held when this cycle must not call the model."""

    def before_loop(self, state: dict, tools: Tools) -> dict:
        """The state the loop starts from."""
        return state

    def before_call(self, usage: Usage) -> None:
        """Raise LimitReached when no more may be sent; `usage`: this cycle's so far."""

    def on_action(self, state: dict, action: Action) -> str | None:
        """Why `action` may not be applied (the model reads it as a [TOOL ERROR]), or None. Raise
        NeedsApproval to hold a call for the operator instead."""
        return None

    def after_action(self, state: dict, outcome: Outcome) -> None:
        """Raise a Stop when this outcome ends the cycle."""

    def on_done(self, state: dict, action: Action) -> str | None:
        """Why `done` may not complete the current task (a [CHECK FAILED] note; the loop goes on), or None."""
        return None

    def on_end(self, state: dict, reason: StopReason) -> StopReason:
        """The cycle's stop reason, once its loop has ended with `reason` (before anything is saved)."""
        return reason


class Gates(Gate):
    """Several gates as one: each hook asks every gate in turn; the first refusal or Stop wins."""

    def __init__(self, gates: list[Gate]):
        self.gates = list(gates)

    def __iter__(self):
        return iter(self.gates)

    def at_wake(self, state: dict) -> None:
        for gate in self.gates:
            gate.at_wake(state)

    def before_loop(self, state: dict, tools: Tools) -> dict:
        for gate in self.gates:
            state = gate.before_loop(state, tools)
        return state

    def before_call(self, usage: Usage) -> None:
        for gate in self.gates:
            gate.before_call(usage)

    def on_action(self, state: dict, action: Action) -> str | None:
        return next((why for why in (gate.on_action(state, action) for gate in self.gates) if why), None)

    def after_action(self, state: dict, outcome: Outcome) -> None:
        for gate in self.gates:
            gate.after_action(state, outcome)

    def on_done(self, state: dict, action: Action) -> str | None:
        return next((why for why in (gate.on_done(state, action) for gate in self.gates) if why), None)

    def on_end(self, state: dict, reason: StopReason) -> StopReason:
        for gate in self.gates:
            reason = gate.on_end(state, reason)
        return reason


NO_GATES = Gates([])
