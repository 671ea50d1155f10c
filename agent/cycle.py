"""One cycle: lock, name, wake, snapshot before, run the loop, snapshot after, sleep, unlock.

    with home_lock(home):                         1. take the lock (Busy -> exit 5)
        cycle_id = new_cycle_id(home, now)        2. name the cycle
        before = load_state(home)                 3. wake (InvalidScratchpad -> exit 6)
        write <id>_before.yaml                    4. exactly what was read
        after, reason = loop(copy of before)      5. iterate: prompt -> model -> dispatcher
        write <id>_after.yaml                     6. last_updated untouched
        write active.yaml with last_updated       7. sleep
                                                  8. unlock; exit code from the stop reason

If step 5 fails (model error, a bug, SIGINT/SIGTERM, a broken invariant) the state saved is the
state as read plus one failure note; the traceback goes to logs/cycle_<id>.log.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import datetime as _dt
import os
import signal
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from . import memory, prompt, schema
from .config import Settings
from .dispatcher import Kind, add_note, dispatch
from .models import Model, Usage
from .outcomes import Interrupted, LimitReached, StopReason
from .scratchpad import (Home, append_index, home_lock, load_state, new_cycle_id, remove_stale_temporaries,
                         write_state)
from .retention import apply_retention
from .secrets import Secrets
from .tools import Registry, ToolContext, build_registry

Reporter = Callable[..., None]

@dataclass
class CycleReport:
    cycle_id: str
    started: str
    model: str
    stop_reason: str = StopReason.ERROR.value
    exit_code: int = 4
    iterations: int = 0
    task_before: str | None = None
    task_after: str | None = None
    usage: Usage = field(default_factory=Usage)
    duration_s: float = 0.0
    files: list[str] = field(default_factory=list)
    error: str | None = None
    prompt_bytes: list[int] = field(default_factory=list)
    archived: int = 0  # items moved from active.yaml to logs/archive.jsonl this cycle
    reflect: str | None = None  # None (off), "applied", or "kept unreflected: why"

    def as_dict(self) -> dict:
        return {
            "cycle_id": self.cycle_id, "started": self.started, "duration_s": round(self.duration_s, 3),
            "model": self.model, "stop_reason": self.stop_reason, "exit_code": self.exit_code,
            "iterations": self.iterations, "task_before": self.task_before, "task_after": self.task_after,
            "usage": self.usage.as_dict(), "files": self.files, "error": self.error,
            "archived": self.archived, "reflect": self.reflect,
        }


class CycleLog:
    """logs/cycle_<id>.log: a timestamped trace of the cycle, secrets redacted. Closed by the cycle."""

    def __init__(self, path, secrets: Secrets):
        self.secrets = secrets
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        except OSError as exc:  # read-only or full home: exit 7 with a clear message, not a traceback
            from .scratchpad import disk_error

            raise disk_error(path, exc) from exc
        self.handle = os.fdopen(fd, "a", encoding="utf-8", errors="backslashreplace", buffering=1)
        self.failed: OSError | None = None

    def __call__(self, message: str) -> None:
        # A log line that cannot be written (disk full) must not turn a cycle into a crash: the
        # state writes that follow report the disk problem (exit 7) on their own.
        if self.failed:
            return
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%H:%M:%S.%f")[:-3]
        try:
            for line in self.secrets.redact(str(message)).splitlines() or [""]:
                self.handle.write(f"{stamp} {line}\n")
        except OSError as exc:
            self.failed = exc

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.handle.flush()
            os.fsync(self.handle.fileno())
        with contextlib.suppress(OSError):
            self.handle.close()


@contextlib.contextmanager
def _signals(handler: Callable[[int, Any], None]):
    """Route SIGTERM and SIGINT to `handler` for the duration (main thread only)."""
    previous = {}
    try:
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, handler)
    except ValueError:  # not the main thread: leave signals alone
        pass
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _raise_interrupted(signum: int, _frame: Any) -> None:
    raise Interrupted(f"interrupted by {signal.Signals(signum).name}")


class Cycle:
    def __init__(self, home: Home, settings: Settings, model: Model, reporter: Reporter | None = None,
                 registry: Registry | None = None, clock: Callable[[], _dt.datetime] | None = None):
        self.home = home
        self.settings = settings
        self.model = model
        self.report_event = reporter or (lambda event, **data: None)
        self.registry = registry or build_registry(settings)
        self.clock = clock or (lambda: _dt.datetime.now(_dt.timezone.utc))
        self.secrets = Secrets.from_settings(settings)
        self.log: Callable[[str], None] = lambda message: None
        self.pending_archive: list[memory.Archived] = []  # archived by reflect, written before saving
        self.interrupted: str | None = None  # a signal that arrived outside the loop

    def _defer_signal(self, signum: int, _frame: Any) -> None:
        # no logging here: the main thread may be inside a log write (reentrant call)
        self.interrupted = f"interrupted by {signal.Signals(signum).name}"

    # ----------------------------------------------------------------------------- the cycle

    def run(self) -> CycleReport:
        started = time.monotonic()
        # From the lock on, SIGTERM/SIGINT are only noted (_defer_signal); the loop turns them into a
        # failed cycle (exit 4), and once the loop is over the cycle's result is still saved.
        with home_lock(self.home, wait=self.settings.lock_wait), _signals(self._defer_signal):  # 1
            self.home.ensure_dirs()
            remove_stale_temporaries(self.home)
            now = self.clock()
            cycle_id = new_cycle_id(self.home, now)                                   # 2
            before = load_state(self.home)                                            # 3
            report = CycleReport(cycle_id, now.isoformat(timespec="seconds"), self.model.name,
                                 task_before=self.secrets.redact(before["current_task"]))
            log = CycleLog(self.home.cycle_log(cycle_id), self.secrets)
            self.log = log
            try:
                log(f"cycle {cycle_id} model={self.model.name} home={self.home.root}")
                self._write(self.home.snapshot(cycle_id, "before"), before, report)     # 4
                self.report_event("start", cycle_id=cycle_id, model=self.model.name, task=report.task_before)
                after = self._run_guarded(before, report)                              # 5
                after = self._bound_memory(after, report)
                # a signal from here on is only noted (_defer_signal): the result is saved whole
                noted_before_saving = self.interrupted
                self._write(self.home.snapshot(cycle_id, "after"), after, report)       # 6
                active = dict(after, last_updated=schema.now_iso())
                self._write(self.home.active, active, report)                          # 7
                report.task_after = self.secrets.redact(after["current_task"])
                report.duration_s = time.monotonic() - started
                append_index(self.home, self._index_record(report))
                if self.interrupted and self.interrupted is not noted_before_saving:
                    log(f"{self.interrupted} while saving: ignored, the cycle's result was saved")
                pruned = apply_retention(self.home, self.settings, protect=[cycle_id])
                if pruned:
                    log(f"retention: removed {len(pruned)} old snapshot/log file(s)")
                log(f"cycle {cycle_id} ended: {report.stop_reason} after {report.iterations} iterations, "
                    f"exit {report.exit_code}, tokens {report.usage.as_dict()}")
            finally:
                log.close()
                self.log = lambda message: None
        self.report_event("end", report=report)
        return report                                                                  # 8

    def _bound_memory(self, state: dict, report: CycleReport) -> dict:
        """Keep notes and completed_tasks within their limits; archive the rest first (nothing lost)."""
        bounded, moved = memory.bound_memory(state, self.settings.notes_budget, self.settings.completed_window)
        moved = self.pending_archive + moved
        if moved:
            records = self.secrets.redact(memory.archive_records(moved, report.cycle_id))
            memory.append_archive(self.home.archive, records)
            report.archived = len(moved)
            self.log(f"archived {len(moved)} item(s) to {self.home.archive.name}")
        return bounded

    def _write(self, path, state: dict, report: CycleReport) -> None:
        write_state(path, self.secrets.redact(state))
        report.files.append(str(path.relative_to(self.home.root)))

    def _index_record(self, report: CycleReport) -> dict:
        record = report.as_dict()
        record.pop("files")
        return record

    def _run_guarded(self, before: dict, report: CycleReport) -> dict:
        """Run the loop; on any failure return the state as read plus a failure note."""
        try:
            if self.interrupted:  # arrived while waking or writing the before snapshot
                raise Interrupted(self.interrupted)
            with _signals(_raise_interrupted):
                after, reason = self._loop(copy.deepcopy(before), report)
            broken = invariant_problems(before, after)
            if broken:
                raise InvariantViolation("; ".join(broken))
            if reason is StopReason.DONE and self.settings.reflect:
                after = self._reflect(before, after, report)  # an interrupt in it fails the cycle
        except (Exception, KeyboardInterrupt, Interrupted) as exc:
            error = "interrupted by SIGINT" if isinstance(exc, KeyboardInterrupt) else f"{exc}"
            kind = type(exc).__name__
            import traceback  # only a failing cycle needs it

            self.log(f"cycle failed: {kind}: {error}\n{traceback.format_exc()}")
            report.error = self.secrets.redact(f"{kind}: {error}")
            report.stop_reason, report.exit_code = StopReason.ERROR.value, StopReason.ERROR.exit_code
            failed = copy.deepcopy(before)
            add_note(failed, f"[CYCLE FAILED] cycle {report.cycle_id}: {kind}: {error} "
                             f"(traceback in logs/cycle_{report.cycle_id}.log)")
            return failed
        report.stop_reason, report.exit_code = reason.value, reason.exit_code
        return after

    def _reflect(self, before: dict, state: dict, report: CycleReport) -> dict:
        """One more model call that curates notes. Any failure keeps the unreflected state."""
        from .dispatcher import ReplyError, parse_reply

        tool = memory.curate_tool()
        try:
            with _signals(_raise_interrupted):
                completion = self.model.complete(memory.REFLECT_RULES, memory.reflect_prompt(state),
                                                 {"anyOf": [tool.action_schema()]})
            report.usage.add(completion.usage)
            self.log(f"reflect: reply {completion.text!r}")
            action = parse_reply(completion.text)
            if action.get("tool") != tool.name:
                raise ReplyError(f"expected the {tool.name} tool, got {action.get('tool')!r}")
            problem = tool.check_args(action.get("args"))
            if problem:
                raise ReplyError(problem)
            curated, moved = memory.apply_curation(state, action["args"]["notes"])
            broken = invariant_problems(before, curated)
            if broken:
                raise InvariantViolation("; ".join(broken))
        except Exception as exc:  # a failed reflection is dropped; an interrupt fails the cycle
            report.reflect = f"kept unreflected: {type(exc).__name__}: {exc}"
            self.log(f"reflect step failed, keeping the unreflected state: {type(exc).__name__}: {exc}")
            return state
        report.reflect = "applied"
        self.pending_archive.extend(moved)
        self.log(f"reflect: notes curated ({len(moved)} line(s) archived)")
        return curated

    # ------------------------------------------------------------------------------ the loop

    def _loop(self, state: dict, report: CycleReport) -> tuple[dict, StopReason]:
        settings = self.settings
        ctx = ToolContext(self.home.root, settings, self.secrets)
        system = prompt.system_prompt(prompt.read_rules(self.home.rules), self.registry)
        action_schema = self.registry.action_schema()
        self.model.start(self.log)
        self.deadline = None if settings.time_budget is None else time.monotonic() + settings.time_budget
        parse_errors_in_a_row = 0
        recent: list[str] = []  # the last actions, to spot the model repeating itself
        try:
            while True:
                self._check_limits(report, parse_errors_in_a_row)
                report.iterations += 1
                n = report.iterations
                warnings = []
                if len(recent) >= 2 and recent[-1] == recent[-2]:
                    warnings.append("WARNING: you sent the same action twice in a row. Its result is in the notes; "
                                    "do something else or call done.")
                user = prompt.user_prompt(state, n, settings.max_iterations, warnings)
                report.prompt_bytes.append(len(system.encode()) + len(user.encode()))
                self.log(f"iteration {n}: prompt {report.prompt_bytes[-1]} bytes")
                completion = self.model.complete(system, user, action_schema)
                report.usage.add(completion.usage)
                self.log(f"iteration {n}: reply {completion.text!r} usage {completion.usage.as_dict()}")
                state, outcome = dispatch(state, completion.text, self.registry, ctx)
                self.log(f"iteration {n}: {outcome.note}")
                # progress lines go to stdout / cron mail: redacted like the files
                shown = dataclasses.replace(outcome, note=self.secrets.redact(outcome.note),
                                            args=self.secrets.redact(outcome.args)) if self.secrets else outcome
                self.report_event("iteration", n=n, max=settings.max_iterations, outcome=shown,
                                  usage=report.usage)
                if outcome.done:
                    return state, StopReason.DONE
                parse_errors_in_a_row = parse_errors_in_a_row + 1 if outcome.kind is Kind.PARSE_ERROR else 0
                recent.append(_action_key(outcome))
                if len(recent) >= settings.repeat_limit and len(set(recent[-settings.repeat_limit:])) == 1 \
                        and recent[-1] is not None:
                    raise LimitReached(StopReason.REPEATED_ACTION,
                                       f"the same action was sent {settings.repeat_limit} times in a row")
        except LimitReached as stop:
            self.log(f"stopped: {stop}")
            add_note(state, f"[STOPPED] {stop.reason.value}: {stop}")
            return state, stop.reason

    def _check_limits(self, report: CycleReport, parse_errors_in_a_row: int) -> None:
        """Every limit that ends a cycle without done is checked here, before each model call."""
        settings = self.settings
        if parse_errors_in_a_row >= settings.max_parse_errors:
            raise LimitReached(StopReason.PARSE_ERRORS, f"{parse_errors_in_a_row} unparseable replies in a row")
        if report.iterations >= settings.max_iterations:
            raise LimitReached(StopReason.MAX_ITERATIONS, f"reached the cap of {settings.max_iterations} iterations")
        if settings.token_budget is not None and report.usage.total_tokens >= settings.token_budget:
            raise LimitReached(StopReason.TOKEN_BUDGET,
                               f"used {report.usage.total_tokens} tokens of a budget of {settings.token_budget}")
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise LimitReached(StopReason.TIME_BUDGET, f"ran past the time budget of {settings.time_budget:g}s")


class InvariantViolation(Exception):
    """The state the loop produced breaks a rule the runtime guarantees; it is not saved."""


def _action_key(outcome) -> str | None:
    """A comparable form of one action (tool + args); None for replies that were not actions."""
    import json

    if outcome.tool is None:
        return None
    try:
        return outcome.tool + json.dumps(outcome.args, sort_keys=True)
    except (TypeError, ValueError):
        return None


def invariant_problems(before: dict, after: dict) -> list[str]:
    """Rules checked before anything is saved (the runtime, not the model, guards the evidence)."""
    found = schema.problems(after)
    if not found:
        done_before, done_after = before["completed_tasks"], after["completed_tasks"]
        if done_after[: len(done_before)] != done_before:
            found.append("completed_tasks read at the start are no longer a prefix of completed_tasks")
        for name in schema.RUNTIME_FIELDS:
            if after.get(name) != before.get(name):
                found.append(f"runtime-owned field '{name}' was changed during the cycle")
    return found
