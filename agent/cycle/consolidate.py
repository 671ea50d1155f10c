"""`agent consolidate`: a cycle of its own, whose one model call rewrites the list sections, accepted
only when the runtime proves nothing was lost (agent/memory/consolidation.py, seed 002).

    take the lock (Busy: exit 5; --wait as for run); read active.yaml and check it against the sections
    name the cycle; nothing to consolidate (no writable list holds an entry): idle, no model, exit 0
    the budgets (spent: budget_exhausted, exit 10, nothing sent)
    <id>_before.yaml: active.yaml as read
    one model call, its only tool `consolidate`; the sections settled as a cycle's wake would
    accepted:  what leaves to the archive (each with the id of its successor), then <id>_after.yaml,
               then active.yaml: stop reason consolidated, exit 0
    reverted:  active.yaml untouched, byte for byte; the violations in the cycle log and the record:
               stop reason consolidation_reverted, exit 3 (a failure: StopReason.is_failure)
    a failure (the model, a signal): active.yaml untouched; stop reason error, exit 4
    aftercare: the index record, retention, metrics, the hook, as after every cycle

The inbox is left for the next cycle or command: a consolidation writes the sections and their
counters, nothing else, and when it is reverted it writes nothing at all.
"""

from __future__ import annotations

import datetime as _dt
import time
from typing import TYPE_CHECKING, Callable

import agent.cycle.interrupts as interrupts
from agent.after.aftercare import after_cycle
from agent.after.cycle_log import CycleLog
from agent.after.report import CycleReport
from agent.after.transcript import Transcript
from agent.common.outcomes import FailureKind, Interrupted, LimitReached, StopReason
from agent.cycle.sleep import save, tell
from agent.gates.registry import check_gates, open_gates
from agent.memory import consolidation
from agent.memory.builtin import Stamp
from agent.memory.one_call import ask
from agent.memory.section_archive import added_rows
from agent.memory.section_settle import settle
from agent.memory.sections import checked, entries_of
from agent.scratchpad import load_state
from agent.secrets import Secrets
from agent.state import now_iso
from agent.store.archive import archive, highest_ids
from agent.store.cycles import new_cycle_id
from agent.store.db import records
from agent.store.lock import home_lock
from agent.store.provenance import add_provenance

if TYPE_CHECKING:
    from agent.after.report import Reporter
    from agent.config import Settings
    from agent.models import Model
    from agent.store.home import Home

# Violations kept in the index record (the cycle log has them all).
RECORD_VIOLATIONS = 5
VIOLATION_CHARS = 300
NOTHING_TO_CONSOLIDATE = "nothing to consolidate: no writable list section holds an entry"


def consolidate_cycle(
    home: Home,
    settings: Settings,
    model: Model,
    reporter: Reporter | None = None,
    clock: Callable[[], _dt.datetime] | None = None,
    secrets: Secrets | None = None,
) -> CycleReport:
    """Run one consolidation in `home`; what happened (the exit code is in the report)."""
    started = time.monotonic()
    now = (clock or (lambda: _dt.datetime.now(_dt.timezone.utc)))()
    secrets = Secrets.from_settings(settings) if secrets is None else secrets
    progress = reporter or (lambda event, **data: None)
    check_gates(settings, home, model.name)  # a cost budget with no price: exit 2 before the lock
    signals = interrupts.Deferred()
    with home_lock(home, wait=settings.lock_wait), interrupts.routed(signals):
        home.ensure_dirs()
        state = load_state(home)  # an invalid active.yaml: exit 6, nothing written
        checked(state, settings.section_specs, home.active)  # a changed kind: exit 2
        report = CycleReport(new_cycle_id(home, now), now.isoformat(timespec="seconds"), model.name)
        report.task_before = report.task_after = secrets.redact(state["current_task"])
        if not any(entries_of(state, spec) for spec in consolidation.consolidatable(settings.section_specs)):
            report.end(StopReason.IDLE)
            report.idle, report.duration_s = NOTHING_TO_CONSOLIDATE, time.monotonic() - started
            after_cycle(home, settings, report, secrets, lambda _line: None, prune=False)
            progress("end", report=report)
            return report
        with (
            CycleLog(home.cycle_log(report.cycle_id), secrets) as log,
            Transcript(home, report.cycle_id, secrets, settings.transcript_max_bytes) as transcript,
        ):
            log(f"consolidation {report.cycle_id} model={model.name} home={home.root}")
            save(home, home.snapshot(report.cycle_id, "before"), state, report, secrets)
            progress("start", cycle_id=report.cycle_id, model=model.name, task=report.task_before)
            after = _consolidate(home, settings, transcript.recording(model), state, report, secrets, log)
            save(home, home.snapshot(report.cycle_id, "after"), after, report, secrets)
            if after is not state:  # accepted: what left is archived already
                save(home, home.active, dict(after, last_updated=now_iso()), report, secrets)
            tell(report, settings, secrets, after)
            report.duration_s = time.monotonic() - started
            after_cycle(home, settings, report, secrets, log)
            log(f"consolidation {report.cycle_id} ended: {report.stop_reason}, exit {report.exit_code}")
    progress("end", report=report)
    return report


def _consolidate(
    home: Home, settings: Settings, model: Model, state: dict, report: CycleReport, secrets: Secrets, log: Callable
) -> dict:
    """The model call and its check: the state to save (`state` itself when nothing is to be saved),
    with the report ended; what an accepted consolidation moved out is archived here, first."""
    specs, stamp = settings.section_specs, Stamp.of(report.cycle_id)
    settled = settle(state, specs, stamp, floor=highest_ids(home))  # as a cycle's wake would
    for note in settled.notes:
        log(f"settled: {note}")
    try:
        gates = open_gates(home, settings, secrets, model, report.cycle_id, _dt.datetime.now(_dt.timezone.utc))
        gates.before_call(report.usage)  # a spent budget: nothing is sent
        with interrupts.raising():
            answer = _ask(model, settings, settled.state, report, secrets, log)
    except LimitReached as stop:
        log(f"stopped: {report.stopped_by(stop, secrets)}")
        report.end(stop.reason)
        return state
    except (Exception, KeyboardInterrupt, Interrupted) as exc:  # the model failed, or a signal: nothing changes
        report.fail(exc, secrets)
        log(f"consolidation failed: {report.error}")
        return state
    args = consolidation.parse_consolidation(answer, settled.state, specs)
    result = (
        args
        if isinstance(args, consolidation.Reverted)
        else consolidation.check_consolidation(
            settled.state, specs, args, max_loss=consolidation.Bounds.of(settings), stamp=stamp
        )
    )
    if isinstance(result, consolidation.Reverted):
        _reverted(result, report, secrets, log)
        return state
    with records(home).write():  # what left and where the successors came from: one transaction, before the save
        report.archived = archive(home, [*settled.leaving, *result.leaving], report.cycle_id, secrets)
        add_provenance(home, added_rows(settled.state, result.state, specs, report.cycle_id, "consolidation"))
    for note in result.notes:
        log(f"consolidated: {note}")
    report.end(StopReason.CONSOLIDATED)
    return result.state


def _ask(model: Model, settings: Settings, state: dict, report: CycleReport, secrets: Secrets, log: Callable):
    """The one model call: its reply (text, or the first native call)."""
    specs = settings.section_specs
    tool = consolidation.consolidate_tool(specs, state)
    rules = consolidation.CONSOLIDATE_RULES
    prompt = consolidation.consolidate_prompt(secrets.redact(state), specs, consolidation.Bounds.of(settings))
    model.start(log)
    report.iterations = 1
    report.prompt_bytes.append(len(rules.encode()) + len(prompt.encode()))
    cap = max(settings.max_output_tokens, consolidation.reply_tokens(state, specs))
    how = {"purpose": "consolidate", "timeout": settings.time_budget, "secrets": secrets, "max_output_tokens": cap}
    completion = ask(model, rules, prompt, tool, report.usage, log, **how)  # its reply checked by the caller
    return completion.replies()[0]


def _reverted(result: consolidation.Reverted, report: CycleReport, secrets: Secrets, log: Callable) -> None:
    """End the report as reverted, each violation in the cycle log and the first few in the record."""
    for violation in result.violations:
        log(f"reverted: {violation}")
    shown = [secrets.redact_text(v)[:VIOLATION_CHARS] for v in result.violations[:RECORD_VIOLATIONS]]
    more = len(result.violations) - len(shown)
    report.violations = shown + ([f"... and {more} more (logs/cycle_{report.cycle_id}.log)"] if more else [])
    report.error_kind = FailureKind.INVARIANT.value  # the model's rewrite broke the citation superset
    report.end(StopReason.CONSOLIDATION_REVERTED)
