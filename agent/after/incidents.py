"""Incidents: what a person is told once, not on every tick, and told again when it is over.

An incident is one stop reason a person must act on (a failure, a parked call, a stall, a spent
budget: exit 4, 8, 9 or 10, and a reverted consolidation, a failure that exits 3). Its key comes
from identities and kinds the runtime owns, never from a server's or a model's words:

    error (and every failure)   the stop reason, the task's identity, the failure kind (`error_kind`:
                                refused, timeout, http_401, http_5xx, model_not_found, ...) and the
                                endpoint
    stalled                     the stop reason, the task's identity (agent/store/task_identity.py;
                                an earlier release's record: its text's, which the task keeps)
    awaiting_approval           the stop reason, the call (`call 3`: one incident per parked call)
    budget_exhausted            the stop reason, the budget and its period (one per UTC day or month)

So one outage is one incident however each error is worded. A record older than `error_kind`
has its kind read again from its error text (`kind_from_text`) and, having no endpoint, takes
the endpoint of the newer record it is compared with: an outage that spans the upgrade is one.

An incident opens at the first cycle that has its key. It lasts through the cycles after it that
have the same key, and through fewer than `incident_close_after` cycles in a row that do not (a
flapping endpoint, down, up, down, is one incident); it ends at the `incident_close_after`-th such
cycle, which *resolves* it (`resolved_incident`: `notify_on: [resolved]` runs the hook once with
the incident's record). A held cycle is part of the incident it holds after; idle cycles (no model
asked) and accepted consolidations (no task's cycle) neither continue nor end one. Nothing is
kept but the records: whether a cycle is the first of its incident that a channel reports (the
line `--quiet` prints for cron mail; the `notify_on` hook) is a pure function of its record and
the records before it, read newest first as far as the incident goes (at most `READ_CAP`).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
from typing import Any, Callable, Iterable, Iterator

from agent.common.outcomes import ExitCode, FailureKind, StopReason, http_kind, is_failure
from agent.common.times import moment_text, record_ended, record_started, span_text
from agent.config import Settings
from agent.store.task_identity import identity_of

# The exit codes of the outcomes a person must act on: the ones --quiet prints a line for.
ACT_ON = (ExitCode.FAILED, ExitCode.AWAITING_APPROVAL, ExitCode.STALLED, ExitCode.BUDGET_EXHAUSTED)
READ_CAP = 1000  # older records read at most to find where an incident began
CLOSE_AFTER = Settings.__dataclass_fields__["incident_close_after"].default  # the setting's default
ERROR_CHARS = 300  # of an incident's error, in its one line


# ------------------------------------------------------------------------------------ the kinds

# An older record's error text, read back into its kind: (pattern, kind), the first match wins. Only
# for records written before `error_kind` was: every newer record carries its kind.
_TEXT_KINDS = (
    (r"^(interrupted:|keyboardinterrupt)|interrupted by sig", FailureKind.INTERRUPTED),
    (r"^invariantviolation:", FailureKind.INVARIANT),
    (r"^modelcrashed:|process \(pid \d+\) (was killed|exited|died)", FailureKind.CRASHED),
    (r"connection refused|errno 111\b|refused the connection", FailureKind.REFUSED),
    (r"timed out|^modeltimeout:|timeout", FailureKind.TIMEOUT),
    (r"cannot reach the model endpoint|connection error|connection (was )?(reset|lost|closed)", FailureKind.CONNECTION),
    (r"malformed response|not valid json", FailureKind.BAD_RESPONSE),
)
_STATUS = re.compile(r"\bhttp (\d{3})\b(.*)", re.IGNORECASE | re.DOTALL)


def kind_from_text(error: Any) -> str:
    """The failure kind of an error as an older record words it (`ModelUnavailable: model request
    failed: HTTP 503: ...`): an HTTP status by its code (a 404 that names a model: model_not_found),
    then the words of each kind, then the Python class it names; else `bug`."""
    text = " ".join(str(error or "").split())
    status = _STATUS.search(text)
    if status:
        code, rest = int(status.group(1)), status.group(2).lower()
        return FailureKind.MODEL_NOT_FOUND.value if code == 404 and "model" in rest else http_kind(code)
    lowered = text.lower()
    for pattern, kind in _TEXT_KINDS:
        if re.search(pattern, lowered):
            return kind.value
    if re.match(r"^(modelunavailable|scriptended):", lowered):
        return FailureKind.UNAVAILABLE.value
    if lowered.startswith("modelerror:"):
        return FailureKind.BAD_RESPONSE.value
    return FailureKind.BUG.value


def record_kind(record: dict) -> str | None:
    """A failed cycle's kind: its `error_kind`, else (an older record) read from its error; a reverted
    consolidation broke an invariant. None: not a failure."""
    if not is_failure(_reason(record)):
        return None
    if record.get("error_kind"):
        return str(record["error_kind"])
    if record.get("stop_reason") == StopReason.CONSOLIDATION_REVERTED.value and not record.get("error"):
        return FailureKind.INVARIANT.value
    return kind_from_text(record.get("error"))


def _old(record: dict) -> bool:
    """Written before records carried `error_kind` (and `error_endpoint`)."""
    return "error_kind" not in record


def _endpoint(record: dict) -> str | None:
    """The endpoint a record's failure was at; None: none, or an older record that does not say."""
    return None if _old(record) else record.get("error_endpoint")


# ------------------------------------------------------------------------------------ the keys


def task_part(record: dict) -> Any:
    """The task an incident is about: the runtime's identity of it (agent/store/task_identity.py),
    never its wording, which the model may change."""
    return identity_of(record)


def _reason(record: dict) -> str | None:
    reason = record.get("stop_reason")
    return record.get("held_for") if reason == StopReason.HELD.value else reason


def incident_key(record: dict, endpoint: str | None = None) -> str | None:
    """The key of the incident a cycle's record is part of (16 hex digits), or None: none.
    `endpoint`: the endpoint an older record (without `error_kind`) is taken to have failed at."""
    reason = _reason(record)
    if record.get("source", "index") != "index":
        return None
    if record.get("exit_code") not in ACT_ON and not is_failure(reason):  # a reverted consolidation exits 3
        return None
    if is_failure(reason):
        where = endpoint if _old(record) else record.get("error_endpoint")
        parts = [reason, task_part(record), record_kind(record), where]
    elif reason == StopReason.STALLED.value:  # the task, however the model words it
        parts = [reason, task_part(record)]
    else:  # awaiting_approval, budget_exhausted: the call, the budget and its period
        parts = [reason, record.get("signature")]
    text = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _idle(record: dict) -> bool:
    """Passed over: neither part of an incident nor its end (no task's cycle: idle, a consolidation accepted)."""
    passed = (StopReason.IDLE.value, StopReason.CONSOLIDATED.value)
    return record.get("stop_reason") in passed or record.get("source", "index") != "index"


def _worked(records: Iterable[dict]) -> Iterator[dict]:
    """The records that are not passed over, of the first READ_CAP."""
    for seen, record in enumerate(records):
        if seen >= READ_CAP:
            return
        if not _idle(record):
            yield record


def incident_run(
    older: Iterable[dict], key: str | None, close_after: int = CLOSE_AFTER, endpoint: str | None = None
) -> list[dict]:
    """The records before a cycle (given newest first) that are part of incident `key`, newest first:
    back to where `close_after` cycles in a row were not part of it (idle records are passed over).
    `endpoint`: the endpoint of the cycle they are compared with, which an older record takes."""
    run: list[dict] = []
    if key is None:
        return run
    apart = 0
    for record in _worked(older):
        if incident_key(record, endpoint) == key:
            run.append(record)
            apart = 0
        else:
            apart += 1
            if apart >= close_after:
                break
    return run


def act_on(record: dict) -> bool:
    """Whether a record is an outcome --quiet prints a line for (held cycles: what they wait on)."""
    return record.get("exit_code") in ACT_ON


def first_to_report(record: dict, run: list[dict], reports: Callable[[dict], bool]) -> bool:
    """Whether `record` is the first of its incident that a channel `reports` (e.g. the notify_on
    filter): it reports it, and none of the earlier records of its incident (`run`) did. A record
    with no incident: whether the channel reports it at all."""
    return reports(record) and not any(reports(r) for r in run)


# ------------------------------------------------------------------------------- the incident


def incident_record(run: list[dict], now: _dt.datetime | None = None) -> dict:
    """An incident as every view and the hook show it, from its records newest first (`run`): {key,
    stop_reason, kind, endpoint, held, task, signature, error (its newest cycle's, as it was), since
    and last (cycle ids), since_time and last_time (ISO, UTC), length_s (from its first cycle's start
    to `now`, else to its newest cycle's end), cycles}."""
    newest, first = run[0], run[-1]
    began, ended = record_started(first), record_ended(newest)
    until = now if now is not None else ended
    return {
        "key": incident_key(newest),
        "stop_reason": _reason(newest),
        "kind": record_kind(newest),
        "endpoint": _endpoint(newest),
        "held": newest.get("stop_reason") == StopReason.HELD.value,
        "task": newest.get("task_after"),
        "signature": newest.get("signature"),
        "error": next((r.get("error") for r in run if r.get("error")), None),
        "since": first.get("cycle_id"),
        "last": newest.get("cycle_id"),
        "since_time": None if began is None else began.isoformat(timespec="seconds"),
        "last_time": None if ended is None else ended.isoformat(timespec="seconds"),
        "length_s": None if began is None or until is None else max(0, round((until - began).total_seconds())),
        "cycles": len(run),
    }


def open_incident(
    newest_first: Iterable[dict],
    close_after: int = CLOSE_AFTER,
    now: _dt.datetime | None = None,
    closing: bool = False,
) -> dict | None:
    """The incident open now, from the records newest first (None: the newest cycle that was not idle
    had none): `incident_record` with `closing: 0`, for `agent status` and every view. With `closing`,
    also one whose newest cycle is fewer than `close_after` worked cycles back, none since part of
    it: not over yet (a flapping endpoint's), `closing` counting those cycles; a view that tells each
    incident once (fleet's --state) keeps it as told until it is resolved."""
    records = _worked(newest_first)
    since_then: list[dict] = []
    for newest in records:
        key = incident_key(newest)
        if key is not None and not any(incident_key(newest, _endpoint(r)) == incident_key(r) for r in since_then):
            run = [newest, *incident_run(records, key, close_after, _endpoint(newest))]
            return dict(incident_record(run, now), closing=len(since_then))
        since_then.append(newest)
        if not closing or len(since_then) >= close_after:
            return None
    return None


def resolved_incident(record: dict, older: Iterable[dict], close_after: int = CLOSE_AFTER) -> dict | None:
    """The incident `record` (a cycle just saved) resolves, from the records before it newest first:
    the one whose newest cycle is `close_after` worked cycles back, none of the cycles since being
    part of it. `incident_record` plus `until` (its last cycle's id), `until_time`, `resolved_by`
    (this cycle) and `close_after`; None: it resolves none (an idle cycle never does)."""
    if _idle(record):
        return None
    records = _worked(older)
    since_then = [record]
    for candidate in records:
        if len(since_then) < close_after:
            since_then.append(candidate)
            continue
        key = incident_key(candidate)
        if key is None or any(incident_key(candidate, _endpoint(r)) == incident_key(r) for r in since_then):
            return None
        where = _endpoint(candidate)
        found = incident_record([candidate, *incident_run(records, key, close_after, where)])
        return dict(
            found,
            until=found["last"],
            until_time=found["last_time"],
            resolved_by=record.get("cycle_id"),
            close_after=close_after,
        )
    return None


# ---------------------------------------------------------------------------- for a person


def _one_line(text: Any, limit: int = ERROR_CHARS) -> str:
    line = " ".join(str(text or "").split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _what(incident: dict) -> str:
    reason = incident["stop_reason"]
    if is_failure(reason):  # a reverted consolidation says so: it has no error of its own
        return "failing" if reason == StopReason.ERROR.value else f"failing: {reason}"
    if reason == StopReason.STALLED.value:
        return f"stalled on task {json.dumps(incident['task'], ensure_ascii=False)}"
    if reason == StopReason.AWAITING_APPROVAL.value:
        return f"{incident['signature'] or 'a call'} awaits the operator"
    return f"{reason}: {incident['signature'] or 'a budget is spent'}"


def _since(incident: dict) -> str:
    """` since Sat 28 Nov 10:00 UTC (3d 8h)`, or "" when the records say no time."""
    began = incident.get("since_time")
    if not began:
        return ""
    length = incident.get("length_s")
    return f" since {moment_text(_dt.datetime.fromisoformat(began))}" + (
        f" ({span_text(length)})" if length is not None else ""
    )


def incident_text(incident: dict) -> str:
    """One line for a person: what the open incident is, since when and for how long, and for a
    failure the real error of its newest cycle (the caller escapes it, as every printed line)."""
    error = f": {_one_line(incident['error'])}" if is_failure(incident["stop_reason"]) and incident["error"] else ""
    held = "; held: no model is called until something changes" if incident["held"] else ""
    return f"{_what(incident)}{_since(incident)}{error} ({incident['cycles']} cycle(s){held})"


def resolved_text(incident: dict) -> str:
    """One line for a resolved incident: what it was, from when to when, and what ended it."""
    began, ended, cycles = incident.get("since_time"), incident.get("until_time"), _count(incident["cycles"], "cycle")
    when = f" ({cycles})"
    if began and ended:
        start, end = _dt.datetime.fromisoformat(began), _dt.datetime.fromisoformat(ended)
        span = span_text((end - start).total_seconds())
        when = f" from {moment_text(start)} to {moment_text(end)} ({span}, {cycles})"
    what = _what(incident)
    if is_failure(incident["stop_reason"]):
        where = f" at {incident['endpoint']}" if incident.get("endpoint") else ""
        what = f"{what} ({incident['kind']}{where})"
    return f"resolved: {what}{when}; then {_count(incident['close_after'], 'cycle')} without it"


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"
