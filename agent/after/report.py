"""What one cycle did: the record printed by `agent run --json` and kept in logs/agent.db."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from agent.common.outcomes import FailureKind, Held, Interrupted, Stop, StopReason
from agent.common.tags import Tag
from agent.models.base import ModelCrashed, ModelError, ModelTimeout, ModelUnavailable, ScriptEnded, Usage
from agent.secrets import Secrets
from agent.state import InvariantViolation

# The kind of a ModelError whose raiser did not say, by its class (the most specific first).
_MODEL_KINDS = (
    (ModelCrashed, FailureKind.CRASHED),
    (ModelTimeout, FailureKind.TIMEOUT),
    (ModelUnavailable, FailureKind.UNAVAILABLE),
    (ScriptEnded, FailureKind.UNAVAILABLE),
    (ModelError, FailureKind.BAD_RESPONSE),
)


def failure_kind(exc: BaseException) -> str:
    """What went wrong, as the cycle record's `error_kind` says it (agent/common/outcomes.py
    `FailureKind`): the model's error its raiser's kind (else its class's), a signal `interrupted`, a
    broken invariant `invariant`, anything else `bug`."""
    if isinstance(exc, (KeyboardInterrupt, Interrupted)):
        return FailureKind.INTERRUPTED.value
    if isinstance(exc, InvariantViolation):
        return FailureKind.INVARIANT.value
    if isinstance(exc, ModelError):
        if exc.kind:
            return str(exc.kind)
        return next(kind.value for cls, kind in _MODEL_KINDS if isinstance(exc, cls))
    return FailureKind.BUG.value


def failure_text(exc: BaseException) -> str:
    """What happened, in words, once: the model's or the signal's own message; a broken invariant
    says so; only a bug names its Python class (then it is the one thing that says what broke)."""
    said = " ".join(str(exc).split())
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted by SIGINT"
    if isinstance(exc, (Interrupted, ModelError)) and said:
        return said
    if isinstance(exc, InvariantViolation):
        return f"the state this cycle would save breaks a rule, so it was not saved: {said}"
    return (
        f"a bug in the runner: {type(exc).__name__}" + (f": {said}" if said else "") + " (its traceback is in the log)"
    )


def killed_notes(cycle_id: str | None) -> list[str]:
    """The note a cycle starts with when the one before it (`cycle_id`) died before saving."""
    return (
        []
        if cycle_id is None
        else [
            Tag.CYCLE_FAILED.line(
                f"cycle {cycle_id} was killed before it saved anything: by a signal no process can catch (SIGKILL, an "
                f"out-of-memory kill) or a power loss; the state is as it read it (its log: logs/cycle_{cycle_id}.log)"
            )
        ]
    )


@dataclass
class CycleReport:
    """What one cycle did: the stop reason and exit code, counts, usage and files (`as_dict` is `run --json`)."""

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
    # per request: the system and user messages (the example turns, the same every time, not counted)
    prompt_bytes: list[int] = field(default_factory=list)
    archived: int = 0  # items moved from active.yaml to the archive this cycle
    reflect: str | None = None  # None (off), "applied", or "kept unreflected: why"
    actions: dict[str, int] = field(default_factory=dict)  # outcome kind -> how many this cycle
    cost: float | None = None  # usage at the model's `prices`; None: the model has no price
    stop_detail: str | None = None  # what the limit that stopped the loop said (redacted); `run --json`, not the record
    idle: str | None = None  # why no model was called (stop reason idle; agent/cycle/idle.py)
    calls: list[dict] = field(default_factory=list)  # calls with side effects: {call, tool, status} (journal.py)
    held_for: str | None = None  # stop reason held: what the cycle waits on (stalled, awaiting_approval)
    signature: str | None = None  # what makes its stop one incident and not another (a budget's period, a call)
    active_digest: str | None = None  # sha256 of active.yaml as the cycle left it (a held cycle: as it found it)
    wake_digest: str | None = None  # sha256 of what wake_when printed, when it said yes
    resumed: bool = False  # `agent resume` was applied at this wake: the stall streak starts over
    incident: str | None = None  # the incident this cycle is part of (agent/after/incidents.py); None: none
    new_incident: bool = False  # this cycle opened it: --quiet's line and the notify_on hook are for it
    violations: list[str] | None = None  # a reverted consolidation: why (the first few); in the record when set
    surfaced: dict | None = None  # with surface sections: {count, entries} a person should know (section_block.py)
    task_id_before: str | None = None  # the current task's identity at wake (agent/store/task_identity.py)
    task_id: str | None = None  # its identity as the cycle left it (a new one after an accepted done)
    waiting: int = 0  # tasks queued behind the current one as the cycle left them (idle, held: as it found them)
    memory_digest: str | None = None  # what a hold compares: the state left, the queue apart (gates/holds.py)
    streak: int | None = None  # cycles in a row the task has ended without done, this one included (gates/stalls.py)
    stalled_on: str | None = None  # a cycle held after a stall: when the task stalled (the stalled cycle's start)
    replaced: int | None = None  # the newest state reset or restore replaced, as its wake saw (store/archive.py)
    error_kind: str | None = None  # a failure: what went wrong (FailureKind, `failure_kind`); None: no failure
    error_endpoint: str | None = None  # a failure at an endpoint: its host and port (no credentials); else None
    resolved: dict | None = None  # the incident this cycle closed (incidents.py `resolved_incident`); None: none
    trace_id: str | None = None  # with otel: the cycle's OpenTelemetry trace (traces.py); in the record when set
    steps: list = field(default_factory=list)  # with otel: the loop's Steps (events.py), for the trace; not printed
    failure_streak: dict | None = None  # a failed cycle's {count, since, note}: the folded note (after/failures.py)
    dropped_tasks: list[str] | None = None  # queued tasks the model dropped, archived (memory/queue_edits.py)
    dropped_goals: list[str] | None = None  # goals the model dropped, archived

    def count(self, kind: str) -> None:
        self.actions[kind] = self.actions.get(kind, 0) + 1

    def fail(self, exc: BaseException, secrets: Secrets) -> str:
        """End as a failed cycle; the failure note for the state as read (after/failures.py folds it)."""
        self.error = secrets.redact_text(failure_text(exc))
        self.error_kind = failure_kind(exc)
        endpoint = getattr(exc, "endpoint", None) if isinstance(exc, ModelError) else None
        self.error_endpoint = None if endpoint is None else secrets.redact_text(str(endpoint))
        self.end(StopReason.ERROR)
        return Tag.CYCLE_FAILED.line(f"cycle {self.cycle_id}: {self.error} (see logs/cycle_{self.cycle_id}.log)")

    def stopped_by(self, stop: Stop, secrets: Secrets) -> str:
        """Keep what a limit said when it stopped the loop (--quiet prints it for exits 8 and 10)."""
        self.stop_detail = secrets.redact_text(str(stop))
        self.signature = None if stop.signature is None else secrets.redact_text(stop.signature)
        return self.stop_detail

    def end(self, reason: StopReason) -> None:
        self.stop_reason, self.exit_code = reason.value, int(reason.exit_code)

    def held(self, held: Held, secrets: Secrets) -> None:
        """End as a cycle a gate held at wake: stop reason held, the exit code of what it waits on."""
        self.stop_reason, self.exit_code = StopReason.HELD.value, int(held.exit_code)
        self.held_for = None if held.held_for is None else held.held_for.value
        self.idle, self.signature = secrets.redact_text(str(held)), held.signature
        for key, value in held.repeated.items():
            if key in ("active_digest", "wake_digest", "stalled_on"):
                setattr(self, key, value)

    def as_dict(self) -> dict:
        return {
            "cycle_id": self.cycle_id,
            "started": self.started,
            "duration_s": round(self.duration_s, 3),
            "model": self.model,
            "stop_reason": self.stop_reason,
            "exit_code": self.exit_code,
            "iterations": self.iterations,
            "task_before": self.task_before,
            "task_after": self.task_after,
            "usage": self.usage.as_dict(),
            "files": self.files,
            "error": self.error,
            "error_kind": self.error_kind,
            "error_endpoint": self.error_endpoint,
            "archived": self.archived,
            "reflect": self.reflect,
            "actions": self.actions,
            "cost": self.cost,
            "idle": self.idle,
            "calls": self.calls,
            "stop_detail": self.stop_detail,
            "held_for": self.held_for,
            "signature": self.signature,
            "active_digest": self.active_digest,
            "wake_digest": self.wake_digest,
            "resumed": self.resumed,
            "incident": self.incident,
            "new_incident": self.new_incident,
            "task_id_before": self.task_id_before,
            "task_id": self.task_id,
            "waiting": self.waiting,
            "memory_digest": self.memory_digest,
            "streak": self.streak,
            "stalled_on": self.stalled_on,
            "replaced": self.replaced,
            "resolved": None if self.resolved is None else self.resolved.get("key"),
            # only where they apply: a home without sections keeps the record it always had
            **({"violations": self.violations} if self.violations is not None else {}),
            **({"surfaced": self.surfaced} if self.surfaced is not None else {}),
            **({"trace_id": self.trace_id} if self.trace_id is not None else {}),
            **({"dropped_tasks": self.dropped_tasks} if self.dropped_tasks else {}),
            **({"dropped_goals": self.dropped_goals} if self.dropped_goals else {}),
            **({"failure_streak": self.failure_streak} if self.failure_streak is not None else {}),
        }

    def index_record(self) -> dict:
        """The record logs/agent.db keeps for this cycle (history and status read only these)."""
        record = self.as_dict()
        record.pop("files")
        record.pop("stop_detail")  # `run --json` and the terminal say it; the record keeps its fields
        return record


Reporter = Callable[..., None]


class SafeReporter:
    """Progress output that fails (a closed pipe, `agent run | head -1`) never fails the cycle."""

    def __init__(self, reporter: Reporter | None):
        self.reporter = reporter

    def __call__(self, event: str, **data) -> None:
        if self.reporter is not None:
            try:
                self.reporter(event, **data)
            except OSError:
                self.reporter = None
