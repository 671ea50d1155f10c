"""Sleep: what a cycle saves once its model's part is over, in an order a crash cannot harm.

    settle         the built-in sections settle (agent/memory/builtin.py): notes past
                   `notes_budget` and completed tasks past `completed_window` are
                   committed to the archive first, then leave the state; so are the entries
                   that left a memory section during the cycle, and the provenance of each
                   entry it added (agent/store/provenance.py: its cycle and route)
    after          <id>_after.yaml: the state as the cycle left it (`last_updated` untouched)
    active         active.yaml: the same, `last_updated` stamped now; the one it replaces is kept
                   (`Kept`: a hard link) until the cycle's record is written, and put back if the
                   record cannot be (exit 7: the previous active.yaml is intact, agent/cycle/run.py)

A crash in between can only duplicate an archived item, never lose one. Every state is redacted
before it is written, and each file written is listed in the report.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import agent.state as state_rules
from agent.common.files import Kept
from agent.gates.holds import memory_digest
from agent.memory.builtin import settle_at_sleep
from agent.memory.specs import Memory
from agent.scratchpad import write_state
from agent.store.archive import archive
from agent.store.db import records

if TYPE_CHECKING:
    from agent.after.report import CycleReport
    from agent.config import Settings
    from agent.models.base import Log
    from agent.secrets import Secrets
    from agent.store.home import Home


def save(home: Home, path: Path, state: dict, report: CycleReport, secrets: Secrets) -> str:
    """Write `state`, redacted, to `path` in the home, and list the file in the report; the digest of
    the bytes written."""
    digest = write_state(path, secrets.redact(state))
    report.files.append(str(path.relative_to(home.root)))
    return digest


def sleep(
    home: Home,
    settings: Settings,
    secrets: Secrets,
    report: CycleReport,
    log: Log,
    after: dict,
    archived: list,
    added: list = (),
) -> tuple[dict, Kept]:
    """Settle `after`'s built-in sections (archiving what leaves it, with `archived`: what reflect moved out and
    the entries that left a section), write the after snapshot and active.yaml: (the state saved,
    the active.yaml it replaced, kept until the caller drops it or puts it back)."""
    after, moved = settle_at_sleep(after, settings.notes_budget, settings.completed_window)
    leaving = [*archived, *moved]
    if leaving or added:
        with records(home).write():  # all that leaves in one transaction, committed before any save
            if leaving:
                report.archived = archive(home, leaving, report.cycle_id, secrets)
                log(f"archived {len(leaving)} item(s)")
            if added:  # where each new entry came from, the runtime's (plain entries too: no sections loaded)
                from agent.store.provenance import add_provenance

                add_provenance(home, added)
    save(home, home.snapshot(report.cycle_id, "after"), after, report, secrets)
    report.memory_digest = memory_digest(secrets.redact(after))  # what the next wake compares, if this one holds
    previous = Kept(home.active)
    try:
        stamped = dict(after, last_updated=state_rules.now_iso())
        report.active_digest = save(home, home.active, stamped, report, secrets)
    except BaseException:
        previous.drop()  # the write failed: active.yaml is the previous one
        raise
    tell(report, settings, secrets, after)
    return after, previous


def tell(report: CycleReport, settings: Settings, secrets: Secrets, state: dict) -> None:
    """Put what the `surface: true` sections of `state` hold in the cycle's record (redacted)."""
    report.surfaced = secrets.redact(Memory.of(settings).surfaced(state))
