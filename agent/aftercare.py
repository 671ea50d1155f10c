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
from .store.retention import delete_cycles, retention_plan
from .store.totals import update_totals


def after_cycle(home: Home, settings: Settings, report: CycleReport, secrets: Secrets,
                log: Callable[[str], None]) -> None:
    """Append the index record, then prune old cycles (the record is written first: history never
    loses a cycle that retention removed the files of), then tell the operator's tools: the
    metrics file, and the on_cycle_end command with the same record."""
    report.cost = cycle_cost(settings.prices, report.model, report.usage)
    record = secrets.redact(dict(report.index_record(), pending_approvals=pending_count(home)))
    append_index(home, record)
    plan = retention_plan(home, settings, protect=[report.cycle_id])
    pruned = [] if plan is None else delete_cycles(plan)
    if pruned:
        log(f"retention: removed {len(pruned)} old snapshot/log file(s)")
    keep_totals(home, report.cycle_id, [(path, plan.sizes.get(path, 0)) for path in pruned] if plan else [], log)
    write_metrics(home, settings, record, log)
    run_cycle_end_hook(home.root, settings, record, secrets, log)


def keep_totals(home: Home, cycle_id: str, removed: list, log: Callable[[str], None]) -> None:
    """Bring logs/totals.json up to date with the record just appended and the files this cycle wrote
    and retention deleted (agent/store/totals.py). A failure is logged: the totals are derived data."""
    written = [home.snapshot(cycle_id, "before"), home.snapshot(cycle_id, "after"), home.cycle_log(cycle_id)]
    try:
        update_totals(home, added=written, removed=removed)
    except Exception as exc:  # the next reader recounts; never cost the cycle its result
        log(f"{home.logs.name}/totals.json not updated: {type(exc).__name__}: {exc}")
