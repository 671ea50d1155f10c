"""How a home is doing: the one computation `agent status`, `agent fleet`, `agent report`, the
metrics file and the hook's record all read, so they cannot disagree.

What was read of a home goes in as `Facts` (the commands gather them from the records and files,
agent/cli/health.py; a cycle's aftercare from the record it just wrote, `cycle_facts`), and
`judge` says its state, what needs a person (`attention`, each item with a key that names the
occurrence, so `fleet --state` tells each once) and where it stands against its schedule.

The states, the most pressing first (the order fleet and the report sort by); a home is `ok` only
when nothing needs a person:

| state | needs a person | when |
| --- | --- | --- |
| not a home | yes | the folder has no scratchpad/ (a bad glob must not blind the monitor) |
| unreadable | yes | this user cannot read the home's files or records (permissions) |
| broken | yes | a file the runner cannot use: config.yaml, rules.md, active.yaml, examples.yaml, logs/agent.db, the workspace, a folder's permissions, no model |
| failing, stalled, held, parked, budget spent | yes | an open incident (agent/after/incidents.py), a call parked, a stall |
| down | yes | no cycle within the schedule's grace (a slot missed), or, without a schedule, for longer than stale_after |
| never ran | yes | no cycle yet |
| surfaced | yes | the agent's `surface: true` sections hold an entry for a person (`tell`) |
| late | no | a slot of the schedule is due, within its grace |
| running | no | a cycle holds the lock |
| ok | no | nothing needs a person |
| idle | no | the newest cycle had nothing to do |
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import statistics
from dataclasses import dataclass, field
from typing import Any

from agent.common.outcomes import StopReason
from agent.common.times import age_text
from agent.state import parse_time

INTERVAL_CYCLES = 20  # the usual interval is the median gap between this many newest cycles
STALE_TIMES = 3  # no cycle for this many usual intervals: down
UNKNOWN_INTERVAL_STALE_S = 86400.0  # fewer than two cycles: down after a day
LEAST_STALE_S = 600.0  # never down sooner (cycles run by hand moments apart make no schedule)
APPROVAL_WAIT_S = 86400.0  # a call parked longer than this needs a person

NOT_A_HOME = "not a home"
UNREADABLE = "unreadable"  # a home whose files or records this user cannot read
BROKEN = "broken"  # a file the runner cannot use: every cycle would refuse to run (exit 2, 6 or 7)
DOWN = "down"
LATE = "late"
SURFACED = "surfaced"
STATES = (
    NOT_A_HOME,
    UNREADABLE,
    BROKEN,
    "failing",
    "stalled",
    "held",
    "parked",
    "budget spent",
    DOWN,
    "never ran",
    SURFACED,
    LATE,
    "running",
    "ok",
    "idle",
)
QUIET_STATES = (LATE, "running", "ok", "idle")  # the states in which nothing needs a person
_STATE_OF_REASON = {
    StopReason.ERROR.value: "failing",
    StopReason.STALLED.value: "stalled",
    StopReason.AWAITING_APPROVAL.value: "parked",
    StopReason.BUDGET_EXHAUSTED.value: "budget spent",
    StopReason.IDLE.value: "idle",
    StopReason.HELD.value: "held",
}


@dataclass
class Facts:
    """What was read of a home, for `judge`. Times are unix times; `now` the moment of judging."""

    now: float
    last: dict | None = None  # the newest cycle: {cycle_id, stop_reason, started (unix), ended (unix|None), source}
    running: bool = False
    incident: dict | None = None  # the open incident (agent/after/incidents.py's open_incident)
    incident_text: str | None = None  # its line for a person
    stalled: bool = False
    approvals_pending: int = 0
    approvals_oldest_age_s: float | None = None
    approvals_first_id: str | None = None
    budgets_spent: list[tuple[str, str]] = field(default_factory=list)  # (budget, its period)
    surfaced: list[dict] = field(default_factory=list)  # the agent's `tell` entries
    problems: list[dict] = field(default_factory=list)  # each {file, problem, fix, state}: see `problem`
    schedule: Any = None  # agent/common/schedule.py's Schedule, or None
    cycles: list[tuple[float, float]] = field(default_factory=list)  # recent (start, end), for the schedule
    usual_interval_s: float | None = None
    stale_after_s: float = UNKNOWN_INTERVAL_STALE_S
    records_read: bool = True  # False: the records could not be read, so nothing is known of its cycles


def problem(file: str, what: str, fix: str, state: str = BROKEN) -> dict:
    """One broken file: which, what is wrong with it, what to do; `state` broken or unreadable."""
    return {"file": file, "problem": what, "fix": fix, "state": state}


def usual_interval(starts: list[float]) -> float | None:
    """The median gap in seconds between `starts` (unix times); None under two."""
    ordered = sorted(starts)
    gaps = [b - a for a, b in zip(ordered, ordered[1:])]
    return round(statistics.median(gaps), 1) if gaps else None


def stale_after_s(setting_hours: float | None, interval: float | None, override: float | None = None) -> float:
    """Seconds without a cycle after which a home without a schedule is down: `override`
    (`--stale-after`), the `stale_after` setting (hours), three usual intervals (ten minutes at
    least), or a day when the interval is unknown."""
    if override is not None:
        return override
    if setting_hours is not None:
        return setting_hours * 3600
    return UNKNOWN_INTERVAL_STALE_S if interval is None else max(STALE_TIMES * interval, LEAST_STALE_S)


def when_text(stamp: float, zone: _dt.tzinfo | None = None) -> str:
    """A time for a person: 'Tue 02:00 UTC' (in the schedule's zone)."""
    when = _dt.datetime.fromtimestamp(stamp, zone or _dt.timezone.utc)
    return when.strftime("%a %d %b %H:%M ") + (when.tzname() or "")


def schedule_view(facts: Facts) -> dict | None:
    """Where the home stands against its schedule (None: it has none): every view prints this."""
    if facts.schedule is None:
        return None
    from agent.common.schedule import slots

    schedule = facts.schedule
    found = slots(schedule, facts.cycles, facts.now)
    zone = schedule.zone
    missed = f"{'at least ' if found.at_least else ''}{found.missed}"
    text = f"next due {when_text(found.next_due, zone)}"
    upcoming = found.next_due if found.next_due > facts.now else schedule.next_slot(facts.now)
    if found.missed:
        text = f"missed {missed} slot(s) since {when_text(found.first_missed, zone)}; next {when_text(upcoming, zone)}"
    elif found.late:
        text = f"late: the slot of {when_text(found.next_due, zone)} had no cycle yet (grace {age_text(found.grace_s)})"
    return {
        "expression": schedule.expression,
        "timezone": schedule.timezone,
        "grace_s": schedule.grace_s,
        "next_due": found.next_due,  # the first slot no cycle met: in the past when late or down
        "next_slot": upcoming,  # the next slot from now
        "last_met_slot": found.last_met,
        "missed": found.missed,
        "missed_at_least": found.at_least,
        "first_missed": found.first_missed,
        "late": found.late,
        "down": found.down,
        "text": text,
    }


def _silence(facts: Facts, schedule: dict | None) -> list[dict]:
    """A home that stopped running: a slot missed, or no cycle for longer than stale_after."""
    last = facts.last
    if not facts.records_read:
        return []
    if last is None:
        if facts.running:
            return []
        return [{"key": "never ran", "text": "no cycle has run yet (is its cron line in place?)"}]
    ended = last.get("ended") if last.get("ended") is not None else last.get("started")
    hung = facts.running and last.get("source") != "index"  # the newest cycle is the one running
    # a schedule's slots are met while a cycle holds the lock, so a hung one is judged by its age
    if schedule is not None and not hung:
        if not schedule["down"]:
            return []
        slot = int(schedule["first_missed"])
        return [{"key": f"missed:{slot}", "text": f"{schedule['text']} (is its cron line or timer still in place?)"}]
    if ended is None or facts.now - ended <= facts.stale_after_s:
        return []
    gone = age_text(facts.now - ended)
    what = f"a cycle has run for {gone}" if hung else f"no cycle for {gone}"
    return [{"key": f"stale:{last['cycle_id']}", "text": f"{what} (stale after {age_text(facts.stale_after_s)})"}]


def _tell_key(item: dict) -> str:
    """An entry's key: its id where it has one, else a digest of its text (a new entry is told once)."""
    ident = item.get("id") or hashlib.sha256(str(item.get("text")).encode()).hexdigest()[:12]
    return f"tell:{item.get('section')}:{ident}"


def attention(facts: Facts, schedule: dict | None) -> list[dict]:
    """What needs a person, each {key, text}; the key names the occurrence (a new cycle, call, day's
    budget, tell entry is a new key), so `fleet --state` tells each once."""
    items = [{"key": f"file:{p['file']}", "text": f"{p['file']}: {p['problem']}; {p['fix']}"} for p in facts.problems]
    items += _silence(facts, schedule)
    if facts.incident:
        items.append({"key": f"incident:{facts.incident['key']}", "text": f"incident: {facts.incident_text}"})
    if (facts.approvals_oldest_age_s or 0) > APPROVAL_WAIT_S:
        items.append(
            {
                "key": f"approval:{facts.approvals_first_id}",
                "text": f"{facts.approvals_pending} call(s) parked, the oldest for {age_text(facts.approvals_oldest_age_s)}",
            }
        )
    items += [{"key": f"budget:{name}:{period}", "text": f"{name} is spent"} for name, period in facts.budgets_spent]
    items += [
        {"key": _tell_key(item), "text": f"the agent says [{item.get('section')}]: {str(item.get('text'))[:240]}"}
        for item in facts.surfaced
    ]
    return items


def state_of(facts: Facts, schedule: dict | None, items: list[dict]) -> str:
    """One word for where a home stands (STATES): the most pressing that holds."""
    if facts.problems:
        return min((p["state"] for p in facts.problems), key=STATES.index)
    if facts.incident:
        held = facts.incident.get("held")
        return "held" if held else _STATE_OF_REASON.get(facts.incident.get("stop_reason"), "failing")
    if facts.stalled:
        return "stalled"
    last = facts.last
    reason = None if last is None else _STATE_OF_REASON.get(last.get("stop_reason"), "ok")
    if reason not in (None, "ok", "idle"):
        return reason
    if facts.approvals_pending:
        return "parked"
    keys = {item["key"].partition(":")[0] for item in items}
    if keys & {"missed", "stale"} and not facts.running:  # a cycle that runs too long is `running` and needs a person
        return DOWN
    if last is None:
        return "running" if facts.running else "never ran"
    if "tell" in keys:
        return SURFACED
    if schedule is not None and schedule["late"]:
        return LATE
    return "running" if facts.running else reason or "ok"


def judge(facts: Facts) -> dict:
    """The home's health: {state, needs_person, attention, problems, schedule, stale}; every view prints this."""
    schedule = schedule_view(facts)
    items = attention(facts, schedule)
    state = state_of(facts, schedule, items)
    return {
        "state": state,
        "needs_person": bool(items) or state not in QUIET_STATES,
        "attention": items,
        "problems": facts.problems,
        "schedule": schedule,
        "stale": any(item["key"].partition(":")[0] in ("stale", "missed") for item in items),
    }


def cycle_span(record: dict) -> tuple[float, float] | None:
    """(start, end) unix times of a recorded cycle; None when it names no start."""
    when = parse_time(record.get("started"))
    if when is None:
        return None
    start = when.timestamp()
    took = record.get("duration_s")
    took = took if isinstance(took, (int, float)) and not isinstance(took, bool) else 0.0
    return start, start + took


def cycle_facts(record: dict, settings: Any, now: float) -> Facts:
    """The facts a cycle's aftercare knows of its home from the record it just wrote (the metrics
    file and the hook's record): its files were just read and used, so none is broken, and it is
    judged as of its end (`now` when the record names no start)."""
    span = cycle_span(record) or (now, now)
    now = span[1]
    reason = record.get("stop_reason")
    incident = None
    if record.get("incident"):
        incident = {
            "key": record["incident"],
            "stop_reason": record.get("held_for") or reason,
            "held": reason == StopReason.HELD.value,
        }
    surfaced = record.get("surfaced") if isinstance(record.get("surfaced"), dict) else {}
    return Facts(
        now=now,
        last={"cycle_id": record.get("cycle_id"), "stop_reason": reason, "started": span[0], "ended": span[1]},
        incident=incident,
        incident_text=f"{reason} (cycle {record.get('cycle_id')}): {str(record.get('error') or '')[:200]}".rstrip(": "),
        approvals_pending=int(record.get("pending_approvals") or 0),
        surfaced=[e for e in surfaced.get("entries") or [] if isinstance(e, dict)],
        schedule=settings.schedule_spec,
        cycles=[span],
    )


def health_record(health: dict) -> dict:
    """What the hook's record carries of the home's health: its state and what needs a person."""
    return {
        "state": health["state"],
        "needs_person": health["needs_person"],
        "attention": [item["text"] for item in health["attention"]],
        **({"schedule": health["schedule"]} if health["schedule"] else {}),
    }
