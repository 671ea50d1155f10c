"""The gate interface: the five gates are one kind of thing, a list of gates is a gate, and a sixth
gate, defined here and listed by the same one line as the others, refuses, holds or stops a real cycle."""

from __future__ import annotations

import importlib
import json

from agent.common.outcomes import Held, LimitReached, StopReason
from agent.config import Settings
from agent.gates import registry
from agent.gates.base import Action, Gate, Gates
from agent.gates.registry import always
from agent.tools import ToolContext, build_registry
from tests.cli.helpers import done, echo, run_cycle
from tests.helpers import read_active, snapshots, write_active

HOOKS = ["check", "at_wake", "before_loop", "before_call", "on_action", "after_action", "on_done", "on_end"]


class ReadOnlyGoals(Gate):
    """The shape of a memory-sections gate: update_scratchpad may not change one section."""

    def on_action(self, state: dict, action: Action) -> str | None:
        if action.tool.name == "update_scratchpad" and "goals" in action.args:
            return "goals are read-only (the operator's)"
        return None


class HeldWhileFlagged(Gate):
    """The shape of a held home: at wake, no model is called while a flag file is there."""

    def at_wake(self, state: dict) -> None:
        if (self.cycle.home.root / "hold").exists():
            raise Held("held: the operator asked for a pause (remove 'hold' to go on)")


class OneCallOnly(Gate):
    """A limit of the gate's own: one model call per cycle."""

    def __init__(self, cycle):
        super().__init__(cycle)
        self.calls = 0

    def before_call(self, usage) -> None:
        if self.calls:
            raise LimitReached(StopReason.MAX_ITERATIONS, "one model call per cycle (OneCallOnly)")
        self.calls += 1


def listed(monkeypatch, name: str) -> None:
    """The one line that adds a gate: its entry in GATES."""
    monkeypatch.setattr(registry, "GATES", [*registry.GATES, (f"tests.gates.test_base:{name}", always)])


def gate_classes() -> list[type]:
    found = []
    for target, _ in registry.GATES:
        module, _, name = target.partition(":")
        found.append(getattr(importlib.import_module(module), name))
    return found


def test_the_five_gates_are_gates_that_change_only_hooks_of_the_one_interface():
    classes = gate_classes()
    assert [c.__name__ for c in classes] == [
        "ApprovalGate",
        "BudgetGate",
        "CheckGate",
        "StallGate",
        "HoldGate",
    ]
    for gate in classes:
        assert issubclass(gate, Gate)
        own = {name for name in vars(gate) if not name.startswith("_")}
        assert own and own <= set(HOOKS), f"{gate.__name__} adds {own - set(HOOKS)} to the interface"


def test_a_plain_cycle_has_the_gates_that_are_always_on_and_no_module_it_does_not_need(tmp_path):
    from agent.store.home import Home

    chosen = registry._classes(Settings(), Home.at(tmp_path))
    assert [c.__name__ for c in chosen] == ["CheckGate", "StallGate", "HoldGate"]
    chosen = registry._classes(Settings(approval_required=["shell"], daily_token_budget=10), Home.at(tmp_path))
    assert [c.__name__ for c in chosen] == ["ApprovalGate", "BudgetGate", "CheckGate", "StallGate", "HoldGate"]
    chosen = registry._classes(Settings(sections={"known": {"kind": "list", "limit": 3}}), Home.at(tmp_path))
    assert [c.__name__ for c in chosen] == ["CheckGate", "StallGate", "HoldGate"]  # sections settle at wake


def test_a_list_of_gates_asks_each_in_turn_and_the_first_refusal_wins(tmp_path):
    class Say(Gate):
        def __init__(self, word: str):
            self.word = word

        def on_action(self, state, action):
            return self.word or None

        def on_end(self, state, reason):
            state["seen"] = state.get("seen", "") + self.word
            return StopReason.STALLED if self.word == "b" else reason

    settings = Settings()
    action = Action(
        build_registry(settings, entry_points=[])["echo"], {"message": "x"}, ToolContext(tmp_path, settings)
    )
    state: dict = {}
    assert Gates([Say(""), Say("a"), Say("b")]).on_action(state, action) == "a"
    assert Gates([Say(""), Say("")]).on_action(state, action) is None
    assert Gates([Say("a"), Say("b"), Say("c")]).on_end(state, StopReason.DONE) is StopReason.STALLED
    assert state["seen"] == "abc"


def test_another_gate_listed_by_one_line_refuses_an_update_with_a_tool_error_in_a_real_cycle(home, monkeypatch):
    write_active(home, {"goals": ["ship it"], "current_task": "plan"})
    listed(monkeypatch, "ReadOnlyGoals")
    result = run_cycle(home, [{"tool": "update_scratchpad", "args": {"goals": ["nap"]}}, done("planned")])
    assert result.exit_code == 0, result.output
    state = read_active(home)
    assert state["goals"] == ["ship it"]
    assert "[TOOL ERROR] update_scratchpad refused: goals are read-only (the operator's)" in state["notes"]


def test_another_gate_can_hold_a_cycle_at_wake_so_that_no_model_is_called(home, monkeypatch):
    write_active(home, {"current_task": "work"})
    (home / "hold").write_text("")
    listed(monkeypatch, "HeldWhileFlagged")
    result = run_cycle(home, [], "--json")  # a model with no replies: calling it would fail the cycle
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout.splitlines()[-1])
    assert record["stop_reason"] == "held" and record["idle"].startswith("held: the operator asked for a pause")
    assert record["held_for"] is None  # held for nothing a person must act on: exit 0
    assert snapshots(home, "before") == [] and read_active(home)["current_task"] == "work"
    (home / "hold").unlink()
    assert run_cycle(home, [done("worked")]).exit_code == 0  # something changed: the cycle runs


def test_another_gate_can_stop_a_real_cycle_before_a_model_call(home, monkeypatch):
    write_active(home, {"current_task": "work"})
    listed(monkeypatch, "OneCallOnly")
    result = run_cycle(home, [echo("one"), echo("two"), done("never")])
    assert result.exit_code == 3, result.output
    notes = read_active(home)["notes"]
    assert notes.splitlines()[-1] == "[STOPPED] max_iterations: one model call per cycle (OneCallOnly)"
    assert "two" not in notes


def test_unlisted_the_same_gates_change_nothing(home):
    """The other side of the three tests above: without its line in GATES, a gate is not asked."""
    (home / "hold").write_text("")
    write_active(home, {"goals": ["g"], "current_task": "work"})
    update = {"tool": "update_scratchpad", "args": {"goals": ["h"]}}
    assert run_cycle(home, [update, echo("one"), done("ok")]).exit_code == 0
    assert read_active(home)["goals"] == ["h"]
