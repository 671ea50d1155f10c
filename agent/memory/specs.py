"""A home's memory, one path: the built-in sections (agent/memory/builtin.py: msa's five fields,
each a `SectionSpec` with its kind, limit and rules) and, beside them, the operator's
(config.yaml's `sections`), and the steps of a cycle or a command over them: check at wake, settle,
edit (`Edits`, what update_scratchpad and reflect apply), the provenance of what was added, the
prompt's block, what is surfaced.

`Memory` is the one place that asks whether a home has operator sections, and only to keep their
modules (agent/memory/sections.py and its siblings, listed in tests/cli/test_run.py) off a plain
cycle's start-up: without them each step is what the built-in sections alone make of it (nothing
checked, settled or rendered beyond msa's fields, every update_scratchpad argument a field's).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent.memory.builtin import Change, Stamp
from agent.setting_checks import SectionSpec
from agent.store.archive import highest_ids

if TYPE_CHECKING:
    from agent.memory.queue_edits import EditContext
    from agent.store.home import Home


@dataclass(frozen=True)
class Edits:
    """A cycle's sections as update_scratchpad and the reflect step apply them (agent/memory/
    section_edits.py): the specs, the state the cycle began from (after wake: it bounds what may
    leave each list in the cycle), the cycle's stamp and the share that may leave
    (`consolidate_max_loss`). No specs: every argument is a field's, and nothing is loaded."""

    specs: tuple[SectionSpec, ...]
    start: dict
    stamp: Stamp
    max_loss: float

    def split(self, args: dict) -> tuple[dict, dict]:
        """update_scratchpad's arguments as (the fields', the sections') (read-only sections included,
        so they are refused by name)."""
        names = {spec.name for spec in self.specs}
        return {k: v for k, v in args.items() if k not in names}, {k: v for k, v in args.items() if k in names}

    def apply(self, state: dict, edits: dict) -> Change:
        if not edits:
            return Change(state)
        from agent.memory.section_edits import apply_edits

        return apply_edits(state, self.specs, edits, start=self.start, max_loss=self.max_loss, stamp=self.stamp)

    def problems(self, after: dict) -> list[str]:
        """Why the state a cycle would save breaks the sections' rules (checked again before saving:
        every edit was checked as it was applied, this holds whatever happened in between)."""
        if not self.specs:
            return []
        from agent.memory.section_edits import loss_problems
        from agent.memory.sections import state_problems

        return state_problems(after, self.specs) + loss_problems(self.start, after, self.specs, self.max_loss)


@dataclass(frozen=True)
class Memory:
    """A home's sections: the built-in ones and, beside them, the operator's (`operator`: config.yaml's
    `sections`, checked; empty for a home without them), and the steps of a cycle or a command over
    them. The one place that asks whether there are operator sections (see the module's docstring)."""

    operator: tuple[SectionSpec, ...] = ()
    max_loss: float = 1.0

    @classmethod
    def of(cls, settings: Any) -> "Memory":
        return cls(settings.section_specs, settings.consolidate_max_loss)

    def checked(self, state: dict, where: object) -> None:
        """Refuse a state the operator's sections cannot be used with (a changed kind: UsageError, exit
        2; a hand-broken section: InvalidScratchpad, exit 6), before anything is written."""
        if self.operator:
            from agent.memory.sections import checked

            checked(state, self.operator, where)

    def problems(self, state: dict) -> tuple[str | None, list[str]]:
        """What `agent doctor` says of `state`: why a cycle would refuse it (a changed kind, a broken
        section; None: it can use it), and the sections over their limit."""
        if not self.operator:
            return None, []
        from agent.memory.section_settle import over_limits
        from agent.memory.sections import kind_conflict, state_problems

        problem = kind_conflict(state, self.operator) or "; ".join(state_problems(state, self.operator)[:3])
        return problem or None, [] if problem else over_limits(state, self.operator)

    def settled(self, home: Home, state: dict, stamp: Stamp) -> Change:
        """At wake (agent/memory/section_settle.py `settle`): every operator section in shape, each id
        counter raised past every id the archive holds."""
        if not self.operator:
            return Change(state)
        from agent.memory.section_settle import settle

        return settle(state, self.operator, stamp, floor=highest_ids(home))

    def edits(self, start: dict, stamp: Stamp) -> Edits:
        """The cycle's edits, bounded by `start` (the state it woke with)."""
        return Edits(self.operator, copy.deepcopy(start), stamp, self.max_loss)

    def edit_context(self, home: Home, stamp: Stamp | None) -> EditContext:
        """What an operator's memory edit needs (agent/memory/queue_edits.py): the sections, the stamp
        its entries take (None: the command's, now) and the archive's highest ids."""
        from agent.memory.queue_edits import EditContext

        if not self.operator:
            return EditContext()
        return EditContext(self.operator, stamp or Stamp.of(), highest_ids(home))

    def added(self, before: dict | None, after: dict, cycle_id: str, route: str) -> list[tuple]:
        """The provenance rows of the operator sections' entries `after` adds to `before`."""
        if not self.operator or before is None:
            return []
        from agent.memory.section_archive import added_rows

        return added_rows(before, after, self.operator, cycle_id, route)

    def block(self, state: dict) -> str:
        """The prompt's block of operator sections, then a blank line ('' without them: msa's prompt)."""
        if not self.operator:
            return ""
        from agent.memory.section_block import render

        return render(state, self.operator) + "\n"

    def surfaced(self, state: dict) -> dict | None:
        """What the `surface: true` sections hold, for the cycle's record (None: no such section, and
        the record stays as it always was)."""
        if not any(spec.surface for spec in self.operator):
            return None
        from agent.memory.section_block import surfaced_summary

        return surfaced_summary(state, self.operator)
