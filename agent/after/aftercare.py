"""What happens once a cycle's state is saved: its record, retention, and whatever else operators
hang off the end of a cycle. Nothing here can change the cycle's result or its exit code."""

from __future__ import annotations

from typing import Callable

from agent.after.report import CycleReport
from agent.config import Settings
from agent.secrets import Secrets
from agent.store.cycles import add_record
from agent.store.db import any_rows
from agent.store.home import Home
from agent.store.retention import apply_retention


def after_cycle(
    home: Home,
    settings: Settings,
    report: CycleReport,
    secrets: Secrets,
    log: Callable[[str], None],
    prune: bool = True,
) -> None:
    """Write the cycle's record, then prune old cycles (the record is written first: history never
    loses a cycle that retention removed the files of), then tell the operator's tools: the
    metrics file, and the on_cycle_end command with the same record."""
    # Each feature's module is imported only when it is in use (no prices, nothing parked, no
    # metrics file, no hook: none of them is), so a plain cycle's start-up does not pay for it.
    if settings.prices:
        from agent.gates.budgets import cycle_cost

        report.cost = cycle_cost(settings.prices, report.model, report.usage)
    pending = {"pending_approvals": 0, "oldest_pending_approval": None}
    if any_rows(home, "approval"):
        from agent.gates.approvals import pending_fields

        pending = pending_fields(home)
    record = secrets.redact(dict(report.index_record(), **pending))
    add_record(home, record)
    pruned = apply_retention(home, settings, protect=[report.cycle_id]) if prune else None  # idle: nothing added
    if pruned and pruned.deleted:
        log(f"retention: removed {pruned.deleted} old snapshot/log file(s) and {pruned.transcripts} transcript(s)")
    if settings.metrics_file is not None:
        from agent.after.metrics import write_metrics

        write_metrics(home, settings, record, log)
    if settings.on_cycle_end:
        from agent.after.hooks import run_cycle_end_hook

        run_cycle_end_hook(home.root, settings, record, secrets, log)
