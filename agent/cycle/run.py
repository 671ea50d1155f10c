"""One cycle: lock, name, wake, snapshot before, run the loop, snapshot after, sleep, unlock.

    with home_lock(home):                         1. take the lock (Busy -> exit 5)
        before = load_state(home) + the inbox     2. wake (InvalidScratchpad -> exit 6)
        cycle_id = new_cycle_id(home, now)        3. name the cycle
        write <id>_before.yaml                    4. exactly what was read
        after, reason = loop(copy of before)      5. iterate: prompt -> model -> dispatcher
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

import agent.cycle.idle as idle
import agent.cycle.interrupts as interrupts
import agent.cycle.journal as journal
import agent.cycle.prompt as prompt
import agent.gates.stalls as stalls
import agent.memory.bounding as memory
import agent.state as state_rules
from agent.after.aftercare import after_cycle
from agent.after.report import CycleReport, Reporter, SafeReporter, killed_notes
from agent.after.transcript import Transcript
from agent.common.outcomes import Interrupted, LimitReached, StopReason
from agent.common.tags import Tag
from agent.config import Settings
from agent.cycle.dispatch import dispatch
from agent.cycle.limits import Limits
from agent.models import Model, Request
from agent.secrets import Secrets
from agent.state import add_note
from agent.store.crash import clean_after_crash
from agent.store.cycle_log import CycleLog
from agent.store.home import Home
from agent.store.ids import new_cycle_id
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
    return _Run(home, settings, model, SafeReporter(reporter), registry).run(
        (clock or (lambda: _dt.datetime.now(_dt.timezone.utc)))(), force
    )


class _Run:
    """The state of one run; made for one cycle and dropped after it."""

    def __init__(self, home: Home, settings: Settings, model: Model, report: Reporter, registry: Registry | None):
        self.home, self.settings, self.model, self.report_event, self.registry = home, settings, model, report, registry
        self.secrets = Secrets.from_settings(settings)
        self.signals = interrupts.Deferred()
        self.budgets = None  # a Budgets when one is set
        self.rules = prompt.read_rules(home.rules)  # a bad rules.md is a usage error (exit 2), before the lock

    def run(self, now: _dt.datetime, force: bool = False) -> CycleReport:  # force: idle.wake
        started = time.monotonic()
        home, secrets = self.home, self.secrets
        if self.settings.budgeted:  # agent/gates/budgets.py is imported only then
            from agent.gates.budgets import Budgets

            self.budgets = Budgets(home, self.settings, self.model.name, now)  # no price for a cost budget: exit 2
        tools = open_registry(self.settings, home.root, secrets, given=self.registry)  # MCP servers: not for idle
        with home_lock(home, wait=self.settings.lock_wait) as held, interrupts.routed(self.signals):  # 1
            home.ensure_dirs()
            swept = clean_after_crash(home, ensure_workspace(home.root, self.settings), held)
            self.killed = swept.killed  # a cycle before this one, killed: its note comes in the loop
            reap_recorded(home.root)  # commands a killed cycle left running
            state = load_state(home)  # an invalid active.yaml: exit 6 before anything is written
            cycle_id = new_cycle_id(home, now)  # 2, noted in logs/cycles.json
            report = CycleReport(cycle_id, now.isoformat(timespec="seconds"), self.model.name)
            before, why_idle = idle.wake(home, self.settings, state, report, force, secrets)  # 3
            if why_idle:  # nothing to do: no model, no snapshot pair, no log, no transcript; one index record
                return idle.record(home, self.settings, report, why_idle, started, secrets, self.report_event)
            with (
                tools as self.registry,
                CycleLog(home.cycle_log(cycle_id), secrets) as self.log,
                Transcript(home.transcript(cycle_id), secrets, self.settings.transcript_max_bytes) as transcript,
            ):
                self.model = transcript.recording(self.model)  # every request and reply, exactly
                self.log(f"cycle {cycle_id} model={self.model.name} home={home.root}{swept.note}")
                self.log(policy_line(home.root, self.settings))  # probed once, remembered in logs/
                self._write(home.snapshot(cycle_id, "before"), before, report)  # 4
                self.report_event("start", cycle_id=cycle_id, model=self.model.name, task=report.task_before)
                after, archived = self._attempt(before, report)  # 5
                noted_before_saving = self.signals.noted  # from here a signal is only noted
                after, moved = memory.bound_memory(after, self.settings.notes_budget, self.settings.completed_window)
                self._archive(archived + moved, report)
                self._write(home.snapshot(cycle_id, "after"), after, report)  # 6
                self._write(home.active, dict(after, last_updated=state_rules.now_iso()), report)  # 7
                report.task_after, report.model = secrets.redact(after["current_task"]), self.model.name  # it answered
                report.duration_s = time.monotonic() - started
                if self.signals.noted is not noted_before_saving:
                    self.log(f"{self.signals.noted} while saving: ignored, the cycle's result was saved")
                after_cycle(home, self.settings, report, secrets, self.log)
                self.log(
                    f"cycle {cycle_id} ended: {report.stop_reason} after {report.iterations} iterations, "
                    f"exit {report.exit_code}, tokens {report.usage.as_dict()}"
                )
        self.report_event("end", report=report)
        return report  # 8

    def _write(self, path, state: dict, report: CycleReport) -> None:
        write_state(path, self.secrets.redact(state))
        report.files.append(str(path.relative_to(self.home.root)))

    def _archive(self, moved: list[memory.Archived], report: CycleReport) -> None:
        """Archive before saving: a crash in between can only duplicate a record, never lose one."""
        if moved:
            memory.append_archive(
                self.home.archive, self.secrets.redact(memory.archive_records(moved, report.cycle_id))
            )
            report.archived = len(moved)
            self.log(f"archived {len(moved)} item(s) to {self.home.archive.name}")

    def _attempt(self, before: dict, report: CycleReport) -> tuple[dict, list[memory.Archived]]:
        """Run the loop (and reflect); on any failure the state as read plus a failure note."""
        try:
            if self.signals.noted:  # arrived while waking or writing the before snapshot
                raise Interrupted(self.signals.noted)
            with interrupts.raising():
                after, reason = self._loop(copy.deepcopy(before), report)
                broken = state_rules.invariant_problems(before, after) + [p for p in [state_size_problem(after)] if p]
                if broken:
                    raise state_rules.InvariantViolation("; ".join(broken))
                archived: list[memory.Archived] = []
                if reason is StopReason.DONE and self.settings.reflect:
                    after, archived, report.reflect = memory.reflect(
                        self.model, before, after, report.usage, self.log, self.limits.seconds_left(), self.secrets
                    )
        except (Exception, KeyboardInterrupt, Interrupted) as exc:
            after, archived, reason = copy.deepcopy(before), [], StopReason.ERROR  # failed cycles count toward stalls
            add_note(after, report.fail(exc, self.secrets))
            self.log(f"cycle failed: {report.error}")
            self.log.block(traceback.format_exc())
        report.end(stalls.judge(self.home, self.settings, after, reason, self.secrets))
        return after, archived

    def _loop(self, state: dict, report: CycleReport) -> tuple[dict, StopReason]:
        """Prompt -> model -> dispatcher until done or a limit."""
        settings, secrets = self.settings, self.secrets
        budgets = self.budgets
        limits = self.limits = Limits(
            settings, budgets and (lambda: budgets.problem(report.usage))
        )  # reflect: time left
        ctx = ToolContext(self.home.root, settings, secrets, journal.Journal(self.home, report, secrets, self.log))
        gated = None
        if (
            settings.approval_required or self.home.approvals.exists()
        ):  # else agent/gates/approvals.py is never imported
            import agent.gates.approvals as approvals

            state = approvals.run_decided(self.home, report.cycle_id, state, self.registry, ctx, self.log, dispatch)
            gated = approvals.gate(settings)
        system = prompt.system_prompt(self.rules, self.registry)
        examples = tuple(prompt.split_examples(system)[1])  # the rules' examples, as chat turns
        action_schema = self.registry.action_schema()
        self.model.start(self.log)
        for note in [Tag.TOOL_ERROR.line(p) for p in self.registry.problems] + killed_notes(self.killed):
            add_note(state, note)  # a plugin or MCP server left out, a killed cycle: said where people look
        try:
            while True:
                limits.before_call()
                n = report.iterations = report.iterations + 1
                shown = secrets.redact(state)  # what the model sees, and what guidance may offer it
                user = prompt.fitted_user_prompt(system, shown, n, settings, limits.warnings())
                report.prompt_bytes.append(len(system.encode()) + len(user.encode()))
                self.log(f"iteration {n}: prompt {report.prompt_bytes[-1]} bytes")
                result = prompt.last_result(shown, n)
                completion = limits.timed(
                    self.model.complete,
                    Request(
                        system,
                        user,
                        action_schema,
                        task=shown["current_task"] or None,
                        last_result=None if result == prompt.NOTHING_YET else result,
                        timeout=limits.seconds_left(),
                        examples=examples,
                    ),
                )
                report.usage.add(completion.usage)
                limits.count_tokens(completion.usage.total_tokens)
                reply = secrets.redact_text(completion.shown)[:2000]  # redacted before the cut: no half key
                self.log(f"iteration {n}: reply {reply!r} usage {completion.usage.as_dict()}")
                for action in completion.replies():  # the text, or each native call in turn: one action each
                    state, outcome = dispatch(
                        state,
                        action,
                        self.registry,
                        ctx,
                        gated or (lambda name: False),
                        completion.cut_at,
                        completion.schema,
                    )
                    report.count(outcome.kind.action)
                    self.log(f"iteration {n}: {outcome.note}")
                    self.report_event(
                        "iteration",
                        n=n,
                        max=settings.max_iterations,
                        usage=report.usage,
                        outcome=outcome.redacted(secrets),
                    )
                    if outcome.kind is Tag.APPROVAL:  # raises LimitReached(AWAITING_APPROVAL): later calls never run
                        approvals.park(self.home, report.cycle_id, state, outcome, secrets)
                    if outcome.done:
                        return state, StopReason.DONE
                    limits.after_reply(outcome.tool, outcome.args, outcome.kind is Tag.PARSE_ERROR)
        except LimitReached as stop:
            self.log(f"stopped: {report.stopped_by(stop, secrets)}")
            add_note(state, Tag.STOPPED.line(f"{stop.reason.value}: {stop}"))
            return state, stop.reason
