"""What happens once a cycle's state is saved: its record, retention, and whatever else operators
hang off the end of a cycle. Nothing here can change the cycle's result or its exit code."""

from __future__ import annotations

from typing import Callable

from .approvals import pending_count
from .budgets import cycle_cost
from .config import Settings
from .hooks import run_cycle_end_hook
from .metrics import write_metrics
from .report import CycleReport
from .secrets import Secrets
from .store.home import Home, append_index
from .store.retention import apply_retention


def after_cycle(home: Home, settings: Settings, report: CycleReport, secrets: Secrets,
                log: Callable[[str], None], prune: bool = True) -> None:
    """Append the index record, then prune old cycles (the record is written first: history never
    loses a cycle that retention removed the files of), then tell the operator's tools: the
    metrics file, and the on_cycle_end command with the same record."""
    report.cost = cycle_cost(settings.prices, report.model, report.usage)
    record = secrets.redact(dict(report.index_record(), pending_approvals=pending_count(home)))
    append_index(home, record)
    pruned = apply_retention(home, settings, protect=[report.cycle_id]) if prune else []  # idle: nothing added
    if pruned:
        log(f"retention: removed {len(pruned)} old snapshot/log file(s)")
    write_metrics(home, settings, record, log)
    run_cycle_end_hook(home.root, settings, record, secrets, log)
