"""Waking: what a cycle is given, and what it does under the lock before it may ask a model.

A `Cycle` holds its inputs, read and checked before the lock (a bad rules.md or examples.yaml, a
cost budget with no price: exit 2, before anything is read or written). Then, awake:

    take the home's lock (Busy: exit 5); from here a signal is only noted
    ready the home: its folders and workspace, what a killed cycle left (temporary files, commands
        still running, a cycle that saved nothing)
    read active.yaml (InvalidScratchpad: exit 6, nothing written), and check it against the
        sections config.yaml defines (a changed kind: exit 2; a hand-broken section: exit 6)
    name the cycle (its row in logs/agent.db) and start its report
    apply the inbox; idle.py decides whether there is anything to do
    open the cycle's gates: any of them may hold it (Held), so that it calls no model
    settle the memory sections of a cycle that will run (`_settle`): what that moves out, sleep archives

A cycle that is idle or held goes no further: idle.py records it (one index record). The lock is
held until the cycle has been saved and its aftercare done.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as _dt
from typing import TYPE_CHECKING, Iterator, NamedTuple

import agent.cycle.examples as worked
import agent.cycle.idle as idle
import agent.cycle.interrupts as interrupts
import agent.cycle.prompt as prompt
from agent.after.report import CycleReport
from agent.common.outcomes import Held
from agent.common.tags import Tag
from agent.cycle.crash import Sweep, clean_after_crash
from agent.cycle.sleep import tell
from agent.gates.registry import check_gates, open_gates
from agent.memory.builtin import Stamp
from agent.memory.specs import Memory
from agent.scratchpad import load_state
from agent.state import add_note
from agent.store.cycles import new_cycle_id
from agent.store.lock import home_lock
from agent.store.provenance import check_tables
from agent.tools.children import reap_recorded
from agent.tools.workspace import ensure_workspace

if TYPE_CHECKING:
    from agent.after.report import Reporter
    from agent.config import Settings
    from agent.gates.base import Gate
    from agent.models.base import Model
    from agent.secrets import Secrets
    from agent.store.home import Home
    from agent.tools import Registry


class Cycle(NamedTuple):
    """One cycle's inputs, read and checked before the lock; made for one cycle and dropped after it.
    What exists only under the lock (the id, the log, the tools, the loop) is passed down, never kept."""

    home: Home
    settings: Settings
    model: Model
    secrets: Secrets  # the cycle's one Secrets
    now: _dt.datetime
    force: bool  # agent run --force: run even with nothing to do, skip wake_when
    progress: Reporter  # what `agent run` shows as the cycle goes
    registry: Registry | None  # tools given by the caller; None: built from the settings
    rules: str
    examples: list[dict]


def given(
    home: Home,
    settings: Settings,
    model: Model,
    secrets: Secrets,
    now: _dt.datetime,
    force: bool,
    progress: Reporter,
    registry: Registry | None,
) -> Cycle:
    """A cycle's inputs, checked: a usage error (exit 2) is raised here, before the lock."""
    rules = prompt.read_rules(home.rules)  # a bad rules.md is a usage error
    examples = worked.read_examples(home.examples)  # so is a bad examples.yaml
    check_gates(settings, home, model.name)  # so is a cost budget with no price for the model
    return Cycle(home, settings, model, secrets, now, force, progress, registry, rules, examples)


class Woken(NamedTuple):
    """A cycle awake: the state it starts from (as read, the inbox applied, the wake's notes), its
    report, what a crash left, its gates, and why it calls no model (None: it runs)."""

    state: dict
    report: CycleReport
    swept: Sweep
    gates: Gate | None  # None for an idle cycle: no gate is opened
    idle: str | Held | None  # why it calls no model: idle (a reason), or held by a gate
    signals: interrupts.Deferred  # a signal that arrived while awake, noted
    read: dict | None = None  # the state as read, before the inbox and settling (provenance)
    leaving: tuple = ()  # what settling the sections moved out: archived at sleep, whatever the work did


@contextlib.contextmanager
def awake(cycle: Cycle) -> Iterator[Woken]:
    """Hold the home for one cycle: wake it (see the module's docstring), and release it on exit."""
    home, settings, secrets, model, now = cycle.home, cycle.settings, cycle.secrets, cycle.model, cycle.now
    signals = interrupts.Deferred()
    with home_lock(home, wait=settings.lock_wait) as held, interrupts.routed(signals):
        home.ensure_dirs()
        swept = clean_after_crash(home, ensure_workspace(home.root, settings), held)
        reap_recorded(home.root)  # commands a killed cycle left running
        state = load_state(home)  # an invalid active.yaml: exit 6 before anything is written
        memory = Memory.of(settings)
        memory.checked(state, home.active)  # a section's kind changed (exit 2), a hand-broken one (exit 6)
        check_tables(home)  # the provenance tables the cycle writes: misshapen, exit 7 before anything runs
        cycle_id = new_cycle_id(home, now)  # its row in logs/agent.db
        report = CycleReport(cycle_id, now.isoformat(timespec="seconds"), model.name)
        read = copy.deepcopy(state)  # before the inbox and settling change it (provenance)
        before, why_idle, woke = idle.wake(home, settings, state, report, cycle.force, secrets)
        tell(report, settings, secrets, before)  # an idle cycle's record says it too
        gates = None if why_idle else open_gates(home, settings, secrets, model, cycle_id, now, woke)
        held = why_idle or _held(gates, before, cycle.force)
        leaving = () if held else _settle(memory, cycle.home, before, cycle_id)
        yield Woken(before, report, swept, gates, held, signals, read, leaving)


def _settle(memory: Memory, home: Home, state: dict, cycle_id: str) -> tuple:
    """A cycle that will run wakes with every section in shape (agent/memory/section_settle.py `settle`):
    each key made, entries written by hand adopted as the operator's, each id counter raised past
    every id the archive holds (so none is issued twice), a section over a lowered limit brought
    within it with a [MEMORY] note. In place: the state the cycle starts from (its before snapshot,
    so `agent diff` shows only what the cycle did). What it moved out, for sleep to archive before
    the state that lost it is saved, whether the work succeeds or fails."""
    change = memory.settled(home, state, Stamp.of(cycle_id))
    if change.state is not state:  # (with nothing to settle it is the very state given, kept as is)
        state.clear()
        state.update(change.state)
    for note in change.notes:
        add_note(state, Tag.MEMORY.line(note))
    return change.leaving


def _held(gates: Gate, state: dict, force: bool) -> Held | None:
    """Why a gate holds this cycle (no model is called), or None. Every gate's at_wake runs, forced or
    not; `agent run --force` is never held (HoldGate stands aside for it, and a hold any other gate
    raised is dropped)."""
    try:
        gates.at_wake(state)
    except Held as held:
        return None if force else held
    return None
