"""How a command ends: exit codes, stop reasons, and the exceptions that carry them.

One definition of each fact. The CLI maps exceptions to exit codes here; the cycle loop
records a stop reason here; the docs' exit-code table is checked against `ExitCode` by a test.
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    DONE = 0  # the cycle ended with `done`, or was idle (no model called)
    USAGE = 2  # bad flag, bad config, unknown provider, missing key: nothing ran
    STOPPED = 3  # the cycle stopped without `done` (a limit)
    FAILED = 4  # the cycle failed: state saved as read plus a failure note
    BUSY = 5  # another process holds the home's lock: nothing read or written
    INVALID_SCRATCHPAD = 6  # active.yaml could not be used: nothing written
    DISK = 7  # the home could not be written (disk full, read-only) or a file it needs read: previous files intact
    AWAITING_APPROVAL = 8  # a call to a gated tool is parked until the operator approves or denies it
    STALLED = 9  # the current task has ended `stall_cycles` cycles in a row without done
    BUDGET_EXHAUSTED = 10  # a daily or monthly budget is spent: nothing was sent to the model


class StopReason(str, enum.Enum):
    DONE = "done"
    MAX_ITERATIONS = "max_iterations"
    PARSE_ERRORS = "parse_errors"  # too many unparseable replies in a row
    TOKEN_BUDGET = "token_budget"
    TIME_BUDGET = "time_budget"
    REPEATED_ACTION = "repeated_action"  # the same action, or an A/B/A/B alternation, over and over
    AWAITING_APPROVAL = "awaiting_approval"
    STALLED = "stalled"
    BUDGET_EXHAUSTED = "budget_exhausted"
    ERROR = "error"
    IDLE = "idle"  # nothing to do, or wake_when said no: no model was called (agent/cycle/idle.py)
    CONSOLIDATED = "consolidated"  # agent consolidate: the rewrite of the sections was accepted
    CONSOLIDATION_REVERTED = "consolidation_reverted"  # agent consolidate: refused, active.yaml untouched
    HELD = "held"  # a gate held the cycle at wake (stalled or awaiting approval, nothing changed): no model called

    @property
    def exit_code(self) -> ExitCode:
        return _EXIT_CODES.get(self, ExitCode.STOPPED)

    @property
    def is_failure(self) -> bool:
        """Whether a cycle that ended so failed: what incidents, alerts and the failure counts count."""
        return self in FAILURES


_EXIT_CODES = {
    StopReason.DONE: ExitCode.DONE,
    StopReason.IDLE: ExitCode.DONE,
    StopReason.CONSOLIDATED: ExitCode.DONE,
    StopReason.ERROR: ExitCode.FAILED,
    StopReason.AWAITING_APPROVAL: ExitCode.AWAITING_APPROVAL,
    StopReason.STALLED: ExitCode.STALLED,
    StopReason.BUDGET_EXHAUSTED: ExitCode.BUDGET_EXHAUSTED,
    StopReason.HELD: ExitCode.STALLED,  # a held cycle ends with the code of what it waits on (Held.exit_code)
}


# The stop reasons that are failures: a failed cycle, and a consolidation the runtime had to revert
# (its model broke the invariant). A failure never counts toward (or ends) a stall, and
# `consecutive_failures` counts them until a cycle succeeds. The one definition every reader uses.
FAILURES = frozenset({StopReason.ERROR, StopReason.CONSOLIDATION_REVERTED})


def is_failure(stop_reason: object) -> bool:
    """`StopReason.is_failure` for a stop reason as a record holds it (text; anything else: no)."""
    try:
        return StopReason(stop_reason).is_failure
    except ValueError:
        return False


class FailureKind(str, enum.Enum):
    """What went wrong in a failed cycle, as the runtime classifies it (never the server's wording):
    the cycle record's `error_kind`. Incidents, the failure note that folds repeats, the records
    database's `error_kind` column and every view read this one list. An HTTP 4xx is its own kind
    per status code (`http_kind`), so a revoked key (401) is never merged with a bad request (400)."""

    REFUSED = "refused"  # the endpoint refused the connection (nothing listens there)
    TIMEOUT = "timeout"  # no answer within the time the cycle gave the request
    CONNECTION = "connection"  # the connection was lost, reset, or never made (DNS, TLS)
    MODEL_NOT_FOUND = "model_not_found"  # the endpoint answered that it has no model of that name
    HTTP_5XX = "http_5xx"  # the endpoint failed (any 5xx): one kind, however it is numbered
    BAD_RESPONSE = "bad_response"  # an answer the client could not use (malformed, empty)
    CRASHED = "crashed"  # the model's own process died mid-call (the embedded model)
    UNAVAILABLE = "unavailable"  # the model cannot be loaded or reached for another reason
    INTERRUPTED = "interrupted"  # a signal (SIGTERM, SIGINT) ended the cycle
    INVARIANT = "invariant"  # the state the cycle would save broke an invariant
    BUG = "bug"  # an unexpected exception in the runner itself


def http_kind(status: int) -> str:
    """The failure kind of an HTTP error status: `http_401` for each 4xx, `http_5xx` for any 5xx
    (404 on a model's name is MODEL_NOT_FOUND, decided where the request is made)."""
    if 500 <= status <= 599:
        return FailureKind.HTTP_5XX.value
    return f"http_{int(status)}"


class AgentError(Exception):
    """An error the CLI reports as one clear message and a documented exit code."""

    exit_code = ExitCode.FAILED


class UsageError(AgentError):
    """Bad flag, config, provider or missing key. Raised before anything is written."""

    exit_code = ExitCode.USAGE


class Busy(AgentError):
    """Another process holds the home's lock."""

    exit_code = ExitCode.BUSY


class InvalidScratchpad(AgentError):
    """active.yaml (or a template) exists but cannot be used."""

    exit_code = ExitCode.INVALID_SCRATCHPAD


class DiskError(AgentError):
    """A write to the home failed (ENOSPC, EROFS, EACCES...). Earlier files are intact."""

    exit_code = ExitCode.DISK


class Interrupted(BaseException):
    """SIGTERM arrived during a cycle. A BaseException, like KeyboardInterrupt."""


class Stop(Exception):
    """Raised inside a cycle to end it early, carrying its stop reason: the one family every limit and
    gate raises (as mini-swe-agent's `InterruptAgentFlow`); the loop and the cycle decide what each means."""

    def __init__(self, reason: StopReason, message: str, signature: str | None = None):
        super().__init__(message)
        self.reason = reason
        self.signature = signature  # what makes this stop one incident and not another (a budget and its period)


class Done(Stop):
    """Raised inside the loop when the model's `done` was accepted: the cycle ends with stop reason done."""

    def __init__(self, message: str = "the model's done was accepted"):
        super().__init__(StopReason.DONE, message)


class LimitReached(Stop):
    """Raised inside the loop when a limit or a gate ends the cycle; carries the stop reason."""


class Parked(LimitReached):
    """Raised inside the loop when a gated call was parked for the operator (agent/gates/approvals.py)."""

    def __init__(self, message: str, signature: str | None = None):
        super().__init__(StopReason.AWAITING_APPROVAL, message, signature)


class Held(Stop):
    """Raised by a gate at wake: this cycle calls no model. It is recorded like an idle cycle (one index
    record, no snapshot pair, no log) with stop reason `held`, the gate's message as the reason, and
    `held_for`: what it waits on (stalled, awaiting_approval), whose exit code it ends with (none: 0).
    `repeated`: fields of the record it holds after that its own record repeats (agent/gates/holds.py)."""

    def __init__(
        self,
        message: str,
        held_for: StopReason | None = None,
        signature: str | None = None,
        repeated: dict | None = None,
    ):
        super().__init__(StopReason.HELD, message, signature)
        self.held_for = held_for
        self.repeated = dict(repeated or {})

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.DONE if self.held_for is None else self.held_for.exit_code
