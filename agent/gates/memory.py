"""Memory: the operator's sections (`sections` in config.yaml), settled at wake.

A cycle of a home with sections wakes with every section in shape before it calls a model
(agent/memory/sections.py `settle`): each section's key made, entries written by hand adopted as
the operator's, each id counter raised past every id the archive holds (so no id is issued
twice), and a section over a lowered limit brought within it, its weakest model entries (or a
text's oldest lines) archived with a [MEMORY] note. The state the cycle starts from (its
`_before` snapshot) is the settled one, so `agent diff` shows only what the cycle did.

What settling moved out is archived at the end of the cycle (`on_end`), before the state that
lost it is saved, whether the cycle's work succeeded or failed: a cycle saves the settled state
either way. A cycle that is held or idle settles nothing and writes nothing.

Every rule of an edit (read-only sections refused by name, limits, when_full, the per-cycle
bound on what leaves a list) is the sections' own, applied by update_scratchpad
(agent/cycle/dispatch.py) and by reflect, and checked again on the state before it is saved.
"""

from __future__ import annotations

from agent.common.outcomes import StopReason
from agent.common.tags import Tag
from agent.gates.base import Gate, GateContext
from agent.memory.section_archive import archive_leaving, highest_ids
from agent.memory.sections import Leaving, Stamp, settle
from agent.state import add_note


class MemoryGate(Gate):
    """Settles the sections at wake (in place: the state the cycle starts from); archives what that
    moved out before the cycle saves."""

    def __init__(self, cycle: GateContext):
        super().__init__(cycle)
        self.leaving: tuple[Leaving, ...] = ()

    def at_wake(self, state: dict) -> None:
        cycle = self.cycle
        change = settle(state, cycle.settings.section_specs, Stamp.of(cycle.cycle_id), floor=highest_ids(cycle.home))
        state.clear()
        state.update(change.state)
        for note in change.notes:
            add_note(state, Tag.MEMORY.line(note))
        self.leaving = change.leaving

    def on_end(self, state: dict, reason: StopReason) -> StopReason:
        cycle = self.cycle
        archive_leaving(cycle.home, cycle.secrets, self.leaving, cycle.cycle_id)
        self.leaving = ()
        return reason
