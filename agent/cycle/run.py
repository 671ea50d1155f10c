"""One cycle: lock, name, wake, snapshot before, run the loop, snapshot after, sleep, unlock.

    with home_lock(home):                         1. take the lock (Busy -> exit 5)
        before = load_state(home) + the inbox     2. wake (InvalidScratchpad -> exit 6)
        cycle_id = new_cycle_id(home, now)        3. name the cycle
        write <id>_before.yaml                    4. exactly what was read
        after, reason = Loop(copy of before).run()  5. iterate: prompt -> model -> dispatcher (loop.py)
        write <id>_after.yaml                     6. last_updated untouched
        write active.yaml with last_updated       7. sleep
                                                  8. unlock; exit code from the stop reason

If step 5 fails (model error, a bug, a signal, a broken invariant) the state saved is the state
as read plus one failure note; the traceback goes to logs/cycle_<id>.log. Every limit lives in
`Limits`; every secret is redacted by one `Secrets` before anything is written, printed or sent.
"""

from __future__ import annotations

import copy
import datetime as _dt
import time
import traceback
from typing import Callable

import agent.cycle.examples as worked
import agent.cycle.idle as idle
import agent.cycle.interrupts as interrupts
import agent.cycle.journal as journal
import agent.cycle.prompt as prompt
import agent.gates.stalls as stalls
import agent.memory.bounding as memory
import agent.state as state_rules
from agent.after.aftercare import after_cycle
from agent.after.cycle_log import CycleLog
from agent.after.report import CycleReport, Reporter, SafeReporter, killed_notes
from agent.after.transcript import Transcript
from agent.common.outcomes import Interrupted, StopReason
from agent.common.tags import Outcome, Tag
from agent.config import Settings
from agent.cycle.crash import clean_after_crash
from agent.cycle.dispatch import dispatch
from agent.cycle.events import Events, Step
from agent.cycle.limits import Limits
from agent.cycle.loop import Loop
from agent.models import Model
from agent.models.base import Log
from agent.secrets import Secrets
from agent.state import add_note
from agent.store.cycles import new_cycle_id
from agent.store.db import any_rows
from agent.store.home import Home
from agent.store.lock import home_lock
from agent.store.state_file import load_state, state_size_problem, write_state
from agent.tools import Registry, ToolContext, open_registry, policy_line
from agent.tools.children import reap_recorded
from agent.tools.workspace import ensure_workspace


def run_cycle(
    home: Home,
    settings: Settings,
    model: Model,
    reporter: Reporter | None = None,
    registry: Registry | None = None,
    clock: Callable[[], _dt.datetime] | None = None,
    force: bool = False,
) -> CycleReport:
    """Run exactly one cycle in `home` and return what happened (the exit code is in the report)."""
    now = (clock or (lambda: _dt.datetime.now(_dt.timezone.utc)))()
    return _Run(home, settings, model, SafeReporter(reporter), registry, now, force).run()


class _Run:
    """One cycle's inputs, read and checked before the lock; made for one cycle and dropped after it.
    What exists only under the lock (the id, the log, the tools, the loop) is passed down, never kept."""

    def __init__(
        self,
        home: Home,
        settings: Settings,
        model: Model,
        report: Reporter,
        registry: Registry | None,
        now: _dt.datetime,
        force: bool,  # idle.wake: run even with nothing to do
    ):
        self.home, self.settings, self.model, self.report_event, self.given = home, settings, model, report, registry
        self.now, self.force = now, force
        self.secrets = Secrets.from_settings(settings)
        self.signals = interrupts.Deferred()
        self.rules = prompt.read_rules(home.rules)  # a bad rules.md is a usage error (exit 2), before the lock
        self.examples = worked.read_examples(home.examples)  # so is a bad examples.yaml
        self.budgets = None  # a Budgets when one is set; agent/gates/budgets.py is imported only then
        if settings.budgeted:
            from agent.gates.budgets import Budgets

            self.budgets = Budgets(home, settings, model.name, now)  # no price for a cost budget: exit 2

    def run(self) -> CycleReport:
        started = time.monotonic()
        home, secrets = self.home, self.secrets
        tools = open_registry(self.settings, home.root, secrets, given=self.given)  # MCP servers: not for idle
        with home_lock(home, wait=self.settings.lock_wait) as held, interrupts.routed(self.signals):  # 1
            home.ensure_dirs()
            swept = clean_after_crash(home, ensure_workspace(home.root, self.settings), held)
            reap_recorded(home.root)  # commands a killed cycle left running
            state = load_state(home)  # an invalid active.yaml: exit 6 before anything is written
            cycle_id = new_cycle_id(home, self.now)  # 2, its row in logs/agent.db
            report = CycleReport(cycle_id, self.now.isoformat(timespec="seconds"), self.model.name)
            before, why_idle = idle.wake(home, self.settings, state, report, self.force, secrets)  # 3
            if why_idle:  # nothing to do: no model, no snapshot pair, no log, no transcript; one index record
                return idle.record(home, self.settings, report, why_idle, started, secrets, self.report_event)
            with (
                tools as registry,
                CycleLog(home.cycle_log(cycle_id), secrets) as log,
                Transcript(home, cycle_id, secrets, self.settings.transcript_max_bytes) as transcript,
            ):
                model = transcript.recording(self.model)  # every request and reply, exactly
                log(f"cycle {cycle_id} model={model.name} home={home.root}{swept.note}")
                log(policy_line(home.root, self.settings))  # probed once, remembered in logs/
                self._write(home.snapshot(cycle_id, "before"), before, report)  # 4
                self.report_event("start", cycle_id=cycle_id, model=model.name, task=report.task_before)
                after, archived = self._attempt(before, report, model, registry, log, swept.killed)  # 5
                noted_before_saving = self.signals.noted  # from here a signal is only noted
                after, moved = memory.bound_memory(after, self.settings.notes_budget, self.settings.completed_window)
                self._archive(log, archived + moved, report)
                self._write(home.snapshot(cycle_id, "after"), after, report)  # 6
                self._write(home.active, dict(after, last_updated=state_rules.now_iso()), report)  # 7
                report.task_after, report.model = secrets.redact(after["current_task"]), model.name  # it answered
                report.duration_s = time.monotonic() - started
                if self.signals.noted is not noted_before_saving:
                    log(f"{self.signals.noted} while saving: ignored, the cycle's result was saved")
                after_cycle(home, self.settings, report, secrets, log)
                log(
                    f"cycle {cycle_id} ended: {report.stop_reason} after {report.iterations} iterations, "
                    f"exit {report.exit_code}, tokens {report.usage.as_dict()}"
                )
        self.report_event("end", report=report)
        return report  # 8

    def _write(self, path, state: dict, report: CycleReport) -> None:
        write_state(path, self.secrets.redact(state))
        report.files.append(str(path.relative_to(self.home.root)))

    def _archive(self, log: Log, moved: list[memory.Archived], report: CycleReport) -> None:
        """Archive before saving: a crash in between can only duplicate a record, never lose one."""
        if moved:
            memory.append_archive(self.home, self.secrets.redact(memory.archive_records(moved, report.cycle_id)))
            report.archived = len(moved)
            log(f"archived {len(moved)} item(s)")

    def _loop(
        self, state: dict, report: CycleReport, model: Model, registry: Registry, log: Log, killed: str | None
    ) -> Loop:
        """The loop of this cycle, built whole once the approved calls have run and the notes it starts
        with are in `state`: its limits, its tools (the gated ones wrapped), its prompt, its events."""
        settings, secrets, budgets = self.settings, self.secrets, self.budgets
        limits = Limits(settings, budgets and (lambda: budgets.problem(report.usage)))  # reflect: time left
        ctx = ToolContext(self.home.root, settings, secrets, journal.Journal(self.home, report, secrets, log))
        if settings.approval_required or any_rows(self.home, "approval"):  # else approvals.py is never imported
            import agent.gates.approvals as approvals

            state = approvals.run_decided(self.home, report.cycle_id, state, registry, ctx, log, dispatch)
            registry = approvals.gated_registry(registry, settings)  # from here a gated call is held, not run
        system = prompt.system_prompt(self.rules, registry)
        examples = worked.offered(self.examples, registry)
        model.start(log)
        for note in [Tag.TOOL_ERROR.line(p) for p in registry.problems] + killed_notes(killed):
            add_note(state, note)  # a plugin or MCP server left out, a killed cycle: said where people look
        events = self._events(report, log)
        return Loop(state, model, registry, ctx, system, examples, report, limits, events, log, self._parker(report))

    def _events(self, report: CycleReport, log: Log) -> Events:
        """The one sink of the loop's steps: the log line, the counts, the progress display."""
        events = Events()
        events.subscribe(lambda step: report.count(step.outcome.kind.action))
        events.subscribe(lambda step: log(f"iteration {step.n}: {step.outcome.note}"))
        events.subscribe(lambda step: self._progress(step, report))
        return events

    def _progress(self, step: Step, report: CycleReport) -> None:
        outcome = step.outcome.redacted(self.secrets)
        self.report_event("iteration", n=step.n, max=self.settings.max_iterations, usage=report.usage, outcome=outcome)

    def _parker(self, report: CycleReport) -> Callable[[dict, Outcome], None]:
        def park(state: dict, outcome: Outcome) -> None:  # only a gated call's outcome gets here
            import agent.gates.approvals as approvals

            approvals.park(self.home, report.cycle_id, state, outcome, self.secrets)  # raises Parked

        return park

    def _attempt(
        self, before: dict, report: CycleReport, model: Model, registry: Registry, log: Log, killed: str | None
    ) -> tuple[dict, list[memory.Archived]]:
        """Run the loop (and reflect); on any failure the state as read plus a failure note."""
        try:
            if self.signals.noted:  # arrived while waking or writing the before snapshot
                raise Interrupted(self.signals.noted)
            with interrupts.raising():
                loop = self._loop(copy.deepcopy(before), report, model, registry, log, killed)
                after, reason = loop.run()
                broken = state_rules.invariant_problems(before, after) + [p for p in [state_size_problem(after)] if p]
                if broken:
                    raise state_rules.InvariantViolation("; ".join(broken))
                archived: list[memory.Archived] = []
                if reason is StopReason.DONE and self.settings.reflect:
                    after, archived, report.reflect = memory.reflect(
                        model, before, after, report.usage, log, loop.limits.seconds_left(), self.secrets
                    )
        except (Exception, KeyboardInterrupt, Interrupted) as exc:
            after, archived, reason = copy.deepcopy(before), [], StopReason.ERROR  # failed cycles count toward stalls
            add_note(after, report.fail(exc, self.secrets))
            log(f"cycle failed: {report.error}")
            log.block(traceback.format_exc())
        report.end(stalls.judge(self.home, self.settings, after, reason, self.secrets))
        return after, archived
