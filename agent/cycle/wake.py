"""Waking: what a cycle does under the lock before it may ask a model.

    take the home's lock (Busy: exit 5); from here a signal is only noted
    ready the home: its folders and workspace, what a killed cycle left (temporary files, commands
        still running, a cycle that saved nothing)
    read active.yaml (InvalidScratchpad: exit 6, nothing written)
    name the cycle (noted in logs/cycles.json) and start its report
    apply the inbox; idle.py decides whether there is anything to do
    open the cycle's gates: any of them may hold it (Held), so that it calls no model

A cycle that is idle or held goes no further: idle.py records it (one index record). The lock is
held until the cycle has been saved and its aftercare done.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

import agent.cycle.idle as idle
import agent.cycle.interrupts as interrupts
from agent.after.report import CycleReport
from agent.common.outcomes import Held
from agent.gates.registry import open_gates
from agent.store.crash import Sweep, clean_after_crash
from agent.store.ids import new_cycle_id
from agent.store.lock import home_lock
from agent.store.state_file import load_state
from agent.tools.children import reap_recorded
from agent.tools.workspace import ensure_workspace

if TYPE_CHECKING:
    from agent.config import Settings
    from agent.gates.base import Gate
    from agent.models.base import Model
    from agent.secrets import Secrets
    from agent.store.home import Home


@dataclass
class Woken:
    """A cycle awake: the state it starts from (as read, the inbox applied, the wake's notes), its
    report, what a crash left, its gates, and why it calls no model (None: it runs)."""

    state: dict
    report: CycleReport
    swept: Sweep
    gates: Gate | None  # None for an idle cycle: no gate is opened
    idle: str | None
    signals: interrupts.Deferred  # a signal that arrived while awake, noted


@contextlib.contextmanager
def awake(
    home: Home, settings: Settings, secrets: Secrets, model: Model, now: _dt.datetime, force: bool
) -> Iterator[Woken]:
    """Hold the home for one cycle: wake it (see the module's docstring), and release it on exit.
    `force` (agent run --force): run even with nothing to do, and skip wake_when."""
    signals = interrupts.Deferred()
    with home_lock(home, wait=settings.lock_wait) as held, interrupts.routed(signals):
        home.ensure_dirs()
        swept = clean_after_crash(home, ensure_workspace(home.root, settings), held)
        reap_recorded(home.root)  # commands a killed cycle left running
        state = load_state(home)  # an invalid active.yaml: exit 6 before anything is written
        cycle_id = new_cycle_id(home, now)  # noted in logs/cycles.json
        report = CycleReport(cycle_id, now.isoformat(timespec="seconds"), model.name)
        before, why_idle = idle.wake(home, settings, state, report, force, secrets)
        gates = None if why_idle else open_gates(home, settings, secrets, model, cycle_id, now)
        yield Woken(before, report, swept, gates, why_idle or _held(gates, before), signals)


def _held(gates: Gate, state: dict) -> str | None:
    """Why a gate holds this cycle (no model is called), or None."""
    try:
        gates.at_wake(state)
    except Held as held:
        return str(held)
    return None
