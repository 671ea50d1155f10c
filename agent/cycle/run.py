"""One cycle: lock, wake, snapshot before, work, snapshot after, sleep, unlock.

    with awake(home) as woken:                   1. take the lock (Busy -> exit 5), read active.yaml
                                                    (InvalidScratchpad -> exit 6), name the cycle, apply
                                                    the inbox; idle or held: one index record, no model
        write <id>_before.yaml                   2. exactly the state the cycle starts from
        after = work(copy of it)                 3. prompt -> model -> dispatcher until done or a limit
                                                    (work.py, loop.py); the gates judge how it ended
        write <id>_after.yaml, active.yaml       4. the built-in sections settled and what left memory
                                                    archived, then the pair's second half, then
                                                    active.yaml with last_updated (sleep.py)
        aftercare                                5. the index record (cannot be written: the previous
                                                    active.yaml is put back, exit 7), retention,
                                                    metrics, the hook
                                                 6. unlock; exit code from the stop reason
                                                    (with otel, then the trace: agent/after/traces.py)

If step 3 fails (model error, a bug, a signal, a broken invariant) the state saved is the state
as read plus one failure note; the traceback goes to logs/cycle_<id>.log. Every limit of the
cycle's own lives in `Limits`; what may stop, hold or refuse across cycles is a gate
(agent/gates/). One `Secrets`, given or built here once, redacts everything the cycle writes,
prints or sends.
"""

from __future__ import annotations

import datetime as _dt
import time
from typing import TYPE_CHECKING, Callable

from agent.after.aftercare import after_cycle
from agent.after.cycle_log import CycleLog
from agent.after.report import CycleReport, SafeReporter
from agent.after.transcript import Transcript
from agent.common.outcomes import StopReason
from agent.cycle.idle import record as record_idle
from agent.cycle.sleep import save, sleep
from agent.cycle.wake import Cycle, awake, given
from agent.cycle.work import work
from agent.secrets import Secrets
from agent.store import task_identity
from agent.tools import open_registry, policy_line
from agent.tools.workspace import settle_workspace

if TYPE_CHECKING:
    from agent.after.report import Reporter
    from agent.config import Settings
    from agent.models import Model
    from agent.store.home import Home
    from agent.tools import Registry


def run_cycle(
    home: Home,
    settings: Settings,
    model: Model,
    reporter: Reporter | None = None,
    registry: Registry | None = None,
    clock: Callable[[], _dt.datetime] | None = None,
    force: bool = False,
    secrets: Secrets | None = None,
) -> CycleReport:
    """Run exactly one cycle in `home` and return what happened (the exit code is in the report).
    `secrets`: the command's one Secrets (built here from the settings when not given)."""
    now = (clock or (lambda: _dt.datetime.now(_dt.timezone.utc)))()
    secrets = Secrets.from_settings(settings) if secrets is None else secrets
    return _run(given(home, settings, model, secrets, now, force, SafeReporter(reporter), registry))


def _run(cycle: Cycle) -> CycleReport:
    started, began_ns = time.monotonic(), time.time_ns()
    home, settings, secrets = cycle.home, cycle.settings, cycle.secrets
    tools = open_registry(settings, home.root, secrets, given=cycle.registry)  # MCP servers: not for idle
    with awake(cycle) as woken:  # 1
        report = woken.report
        if woken.idle:  # no model, no snapshot pair, no log, no transcript; one index record
            return record_idle(home, settings, report, woken.idle, started, secrets, cycle.progress)
        with (
            tools as registry,
            CycleLog(home.cycle_log(report.cycle_id), secrets) as log,
            Transcript(home, report.cycle_id, secrets, settings.transcript_max_bytes) as transcript,
        ):
            model = transcript.recording(cycle.model)  # every request and reply, exactly
            log(f"cycle {report.cycle_id} model={model.name} home={home.root}{woken.swept.note}")
            log(policy_line(home.root, settings))  # probed once, remembered in logs/
            save(home, home.snapshot(report.cycle_id, "before"), woken.state, report, secrets)  # 2
            cycle.progress("start", cycle_id=report.cycle_id, model=model.name, task=report.task_before)
            after, archived, added = work(cycle, woken, model, registry, log)  # 3
            for problem in registry.later_problems():
                log(problem)
            settled = settle_workspace(home.root, settings)  # no setuid, setgid or world-write bit left
            if settled:
                log(settled)
            noted_before_saving = woken.signals.noted  # from here a signal is only noted
            left = [*woken.leaving, *archived]  # what settling the sections moved out, then the work
            after, previous = sleep(home, settings, secrets, report, log, after, left, added)  # 4
            report.task_after, report.model = secrets.redact(after["current_task"]), model.name  # it answered
            done = report.stop_reason == StopReason.DONE.value  # accepted: the queue advanced
            report.task_id = task_identity.at_end(report.task_id_before, done, report.cycle_id)
            report.waiting = len(after["pending_actions"])
            report.duration_s = time.monotonic() - started
            if woken.signals.noted is not noted_before_saving:
                log(f"{woken.signals.noted} while saving: ignored, the cycle's result was saved")
            if settings.otel and report.iterations:  # it asked a model: its trace, sent once the home is released
                from agent.after.traces import new_trace_id

                report.trace_id = new_trace_id()  # in the record
            after_cycle(home, settings, report, secrets, log, previous=previous)  # 5
            log(
                f"cycle {report.cycle_id} ended: {report.stop_reason} after {report.iterations} iterations, "
                f"exit {report.exit_code}, {report.usage}"
            )
    cycle.progress("end", report=report)
    if report.trace_id is not None:  # the home is released: a slow collector holds only this process, bounded
        from agent.after.traces import send_trace

        send_trace(home, settings, report, transcript.timeline, began_ns, secrets)
    return report  # 6
