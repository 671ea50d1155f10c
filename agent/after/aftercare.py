"""What happens once a cycle's state is saved: its record, retention, and whatever else operators
hang off the end of a cycle. Nothing here can change the cycle's result or its exit code."""

from __future__ import annotations

from typing import Callable

from agent.after.incidents import act_on, first_to_report, incident_key, incident_run
from agent.after.report import CycleReport
from agent.common.files import Kept
from agent.common.outcomes import Busy, DiskError
from agent.config import Settings
from agent.secrets import Secrets
from agent.store.cycles import add_record, newest_first
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
    previous: Kept | None = None,
) -> None:
    """Write the cycle's record (with the incident it is part of, and whether it opened it: see
    incidents.py), then prune old cycles (the record is written first: history never loses a cycle
    that retention removed the files of), then tell the operator's tools: the metrics file, and the
    on_cycle_end command with the same record (with notify_on: once per incident)."""
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
    key = incident_key(record)  # the incident this cycle is part of, and the earlier cycles of it
    run = incident_run(newest_first(home), key)  # none read for a cycle with no incident (idle, done)
    report.incident = record["incident"] = key
    report.new_incident = record["new_incident"] = key is not None and first_to_report(record, run, act_on)
    _record(home, record, previous)
    if prune:  # idle: nothing added
        _retention(home, settings, report.cycle_id, log)
    if settings.metrics_file is not None:
        from agent.after.metrics import write_metrics

        _outlet(home, "metrics_file", write_metrics(home, settings, record, log), report.cycle_id, log)
    if settings.on_cycle_end:
        from agent.after.hooks import run_cycle_end_hook, wants_hook

        # notify_on set: once per incident, at its first cycle the filter takes; unset: every cycle
        filtered = settings.notify_on is not None
        if not filtered or first_to_report(record, run, lambda r: wants_hook(settings, str(r.get("stop_reason")))):
            problem = run_cycle_end_hook(home.root, settings, record, secrets, log)
            _outlet(home, "on_cycle_end", problem, report.cycle_id, log)


def _record(home: Home, record: dict, previous: Kept | None) -> None:
    """Write the record. The active.yaml it vouches for stands from then on (`previous` is dropped);
    a record that cannot be written puts the previous active.yaml back (exit 7, the file intact; a
    database another process kept locked, exit 5, the same)."""
    try:
        add_record(home, record)
    except (DiskError, Busy) as exc:
        if previous is None:
            raise
        failed = previous.put_back()
        if isinstance(exc, Busy):
            raise
        cycle_id = record["cycle_id"]
        raise DiskError(
            f"{exc}; active.yaml is as it was before cycle {cycle_id} (its result is in "
            f"scratchpad/{cycle_id}_after.yaml, with no record in logs/agent.db)"
            if failed is None
            else f"{exc}; and active.yaml could not be put back as it was ({failed}): it holds cycle {cycle_id}'s result"
        ) from exc
    if previous is not None:
        previous.drop()


def _retention(home: Home, settings: Settings, cycle_id: str, log: Callable[[str], None]) -> None:
    """Prune old cycles (the one just recorded is kept). A failure is logged: the cycle is recorded,
    so it keeps its result and exit code; the next cycle prunes."""
    try:
        pruned = apply_retention(home, settings, protect=[cycle_id])
    except Exception as exc:
        log(f"retention not done: {type(exc).__name__}: {exc}")
        return
    if pruned and pruned.deleted:
        log(f"retention: removed {pruned.deleted} old snapshot/log file(s) and {pruned.transcripts} transcript(s)")


def _outlet(home: Home, name: str, problem: str | None, cycle_id: str, log: Callable[[str], None]) -> None:
    """Keep whether an outlet worked, for `status` (agent/after/outlets.py); a failure to is logged."""
    from agent.after.outlets import note_outlet

    try:
        note_outlet(home, name, problem, cycle_id)
    except Exception as exc:  # never cost the cycle its result
        log(f"outlets not updated in {home.database.name}: {type(exc).__name__}: {exc}")
