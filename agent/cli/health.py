"""How a home is doing, for `agent fleet` and `agent report`: what `agent status` says of it (the
same function, so the two never disagree), how often it usually runs, its state, and what needs a
person. It reads what `status` reads (the index's end, the running totals, the parked calls) and
the newest 20 cycles: never the whole history.

A home needs a person when any of these holds (each one an `attention` item with a key, which
`agent fleet --state` remembers so that it reports each once):

- no cycle for longer than `stale_after` (default: three times its usual interval, the median gap
  between its last 20 cycles, idle ones included, and ten minutes at least; a day while it has run
  fewer than two), or no cycle at all: a scheduler that stopped firing says nothing itself;
- an open incident, as `agent status` tells it (agent/after/incidents.py: failed, stalled, awaiting
  approval, budget exhausted, exits 4, 8, 9, 10, and a consolidation reverted, a failure too; a held
  cycle is part of the one it holds after);
- a call parked for longer than a day;
- a daily or monthly budget spent;
- a config.yaml or an active.yaml that no cycle can use (every cycle would exit 2 or 6);
- a folder that is not a home at all (a bad glob must not blind the monitor).
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from agent.after.incidents import incident_text
from agent.cli.common import age, clip, existing_home, home_settings
from agent.cli.history import recent_history
from agent.common.outcomes import AgentError, StopReason
from agent.config import Settings
from agent.state import parse_time

INTERVAL_CYCLES = 20  # the usual interval is the median gap between this many newest cycles
STALE_TIMES = 3  # no cycle for this many usual intervals: stale
UNKNOWN_INTERVAL_STALE_S = 86400.0  # fewer than two cycles: stale after a day
LEAST_STALE_S = 600.0  # never stale sooner (cycles run by hand moments apart make no schedule)
APPROVAL_WAIT_S = 86400.0  # a call parked longer than this needs a person

# A home's state, the most pressing first: the order `agent fleet` and the report's index sort by.
NOT_A_HOME = "not a home"
UNREADABLE = "unreadable"  # a home whose files or records this user cannot read (or a broken database)
STATES = (
    NOT_A_HOME,
    UNREADABLE,
    "failing",
    "stalled",
    "held",
    "parked",
    "budget spent",
    "broken",  # a config.yaml, active.yaml or approvals no cycle can use
    "stale",  # no cycle for longer than stale_after: its scheduler may have stopped
    "never ran",
    "running",
    "ok",
    "idle",
)
_STATE_OF_REASON = {
    StopReason.ERROR.value: "failing",
    StopReason.STALLED.value: "stalled",
    StopReason.AWAITING_APPROVAL.value: "parked",
    StopReason.BUDGET_EXHAUSTED.value: "budget spent",
    StopReason.IDLE.value: "idle",
    "held": "held",
}
BUDGETS = (
    ("daily_token_budget", "today", "tokens"),
    ("daily_cost_budget", "today", "cost"),
    ("monthly_token_budget", "month", "tokens"),
    ("monthly_cost_budget", "month", "cost"),
)


def usual_interval(records: list[dict]) -> float | None:
    """The median gap in seconds between the starts of `records` (oldest first); None under two."""
    starts = sorted(when.timestamp() for when in (parse_time(r.get("started")) for r in records) if when)
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    return round(statistics.median(gaps), 1) if gaps else None


def stale_after_s(settings: Settings, interval: float | None, override: float | None = None) -> float:
    """Seconds without a cycle after which a home is stale: `override` (`--stale-after`), the
    `stale_after` setting (hours), three usual intervals (ten minutes at least), or a day when the
    interval is unknown."""
    if override is not None:
        return override
    if settings.stale_after is not None:
        return settings.stale_after * 3600
    return UNKNOWN_INTERVAL_STALE_S if interval is None else max(STALE_TIMES * interval, LEAST_STALE_S)


def last_age(status: dict) -> float | None:
    """Seconds since the newest cycle ended (or, with no record yet, started); None: no cycle."""
    last = status["last_cycle"]
    if last is None:
        return None
    return last["age_s"] if last["age_s"] is not None else last["started_age_s"]


def state_of(status: dict) -> str:
    """One word for where a home stands (STATES), from what `agent status` says of it."""
    last = status["last_cycle"]
    if last is None:
        return "running" if status["running"] else "never ran"
    incident = status.get("incident")
    if incident:
        return "held" if incident.get("held") else _STATE_OF_REASON.get(incident["stop_reason"], "failing")
    if (status.get("stall") or {}).get("stalled"):
        return "stalled"
    reason = _STATE_OF_REASON.get(last["stop_reason"], "ok")
    if reason in ("ok", "idle") and (status.get("approvals") or {}).get("pending"):
        return "parked"
    return "running" if status["running"] and reason in ("ok", "idle") else reason


QUIET = ("ok", "idle")  # the states that say nothing needs a person
_STATE_OF_ITEM = (("stale:", "stale"), ("never ran", "never ran"), ("approval:", "parked"), ("budget:", "budget spent"))


def state_with(state: str, items: list[dict]) -> str:
    """The state, never a quiet one while something needs a person: then the most pressing of its
    items' (STATES' order: broken before parked, budget spent, stale), so a chip and its home's list
    always agree."""
    if state not in QUIET or not items:
        return state

    def named(item: dict) -> str:
        return next((word for prefix, word in _STATE_OF_ITEM if item["key"].startswith(prefix)), "broken")

    return min((named(item) for item in items), key=STATES.index)


def budgets_used(status: dict) -> list[dict]:
    """Each budget set: what its period used of it, and whether it is spent."""
    spending = status.get("spending") or {}
    rows = []
    for name, period, unit in BUDGETS:
        spent = spending.get(period) or {}
        limit = spent.get(f"{'token' if unit == 'tokens' else 'cost'}_budget")
        if limit is None:
            continue
        used = spent.get(unit, 0)
        rows.append(
            {
                "budget": name,
                "period": spent.get("day") or spent.get("month"),
                "used": used,
                "limit": limit,
                "fraction": round(used / limit, 4),
                "spent": used >= limit,
            }
        )
    return rows


def _incident(status: dict) -> dict | None:
    """The open incident, as `agent status` tells it (agent/after/incidents.py)."""
    return status.get("incident")


def attention(status: dict, age_s: float | None, stale_s: float) -> list[dict]:
    """What needs a person in a home, each {key, text}: the key names the occurrence (a new cycle, a new
    call, a new day's budget is a new key), so `fleet --state` tells each once."""
    items = []
    last = status["last_cycle"]
    if last is None and not status["running"]:
        items.append({"key": "never ran", "text": "no cycle has run yet (is its cron line in place?)"})
    elif age_s is not None and age_s > stale_s:
        hung = status["running"] and last.get("source") != "index"  # the newest cycle is the one running
        what = f"a cycle has run for {age(age_s)}" if hung else f"no cycle for {age(age_s)}"
        items.append({"key": f"stale:{last['cycle_id']}", "text": f"{what} (stale after {age(stale_s)})"})
    incident = _incident(status)
    if incident:
        items.append({"key": f"incident:{incident['key']}", "text": f"incident: {clip(incident_text(incident), 240)}"})
    approvals = status.get("approvals") or {}
    if (approvals.get("oldest_age_s") or 0) > APPROVAL_WAIT_S:
        items.append(
            {
                "key": f"approval:{approvals['ids'][0]}",
                "text": f"{approvals['pending']} call(s) parked, the oldest for {age(approvals['oldest_age_s'])}",
            }
        )
    if status.get("approvals_error"):
        items.append({"key": "approvals file", "text": f"approvals: {clip(status['approvals_error'], 160)}"})
    for budget in budgets_used(status):
        if budget["spent"]:
            items.append(
                {"key": f"budget:{budget['budget']}:{budget['period']}", "text": f"{budget['budget']} is spent"}
            )
    for field, what in (("config_error", "config"), ("scratchpad_error", "scratchpad")):
        if status.get(field):
            items.append({"key": field, "text": f"{what}: {clip(status[field], 160)}"})
    return items


def home_health(folder: Path, stale_override: float | None = None) -> dict:
    """How the home in `folder` is doing (see the module's docstring); a folder that is not a home,
    or whose files cannot be read, is a row saying so that needs a person."""
    from agent.cli.inspect import status_report  # status's module: loaded by the commands that use it

    try:
        home = existing_home(folder)
    except (AgentError, OSError) as exc:
        return not_a_home(folder, exc)
    try:
        status, _ = status_report(home)
        recent = recent_history(home, status["running"], INTERVAL_CYCLES)
    except (AgentError, OSError) as exc:  # a home whose records cannot be read (permissions, a broken database)
        return not_a_home(folder, exc, home=True)
    settings = home_settings(home.root)
    interval = usual_interval(recent)
    stale_s = stale_after_s(settings, interval, stale_override)
    age_s = last_age(status)
    items = attention(status, age_s, stale_s)
    last = status["last_cycle"]
    approvals = status.get("approvals") or {}
    today = (status.get("spending") or {}).get("today") or {}
    return {
        "home": str(home.root),
        "is_home": True,
        "state": state_with(state_of(status), items),
        "running": status["running"],
        "last_cycle": last,
        "last_outcome": None if last is None else last["stop_reason"],
        "last_age_s": None if age_s is None else round(age_s, 1),
        "usual_interval_s": interval,
        "stale_after_s": round(stale_s, 1),
        "stale": any(item["key"].startswith("stale:") for item in items),
        "incident": _incident(status),
        "approvals_pending": approvals.get("pending", 0),
        "approvals_oldest_age_s": approvals.get("oldest_age_s"),
        "budgets": budgets_used(status),
        "cost_today": today.get("cost", 0.0),
        "unpriced_today": today.get("unpriced_cycles", 0),
        "attention": items,
        "needs_person": bool(items),
        "status": status,
    }


def not_a_home(folder: Path, exc: Exception, home: bool = False) -> dict:
    """The row of a folder that is not a home, or of a `home` whose files cannot be read: it needs a person."""
    from agent.cli.common import unusable_file

    if isinstance(exc, OSError):
        state, why = UNREADABLE, unusable_file(exc)
    else:
        state, why = (UNREADABLE, f"cannot use it: {exc}") if home else (NOT_A_HOME, str(exc))
    text = clip(why, 240)
    if state == NOT_A_HOME:  # one line for a monitor: what is wrong, not the whole remedy
        folder = Path(folder).expanduser()
        text = (
            "not a home: no such folder"
            if not folder.is_dir()
            else "not a home: it has no scratchpad/ folder"
            if not (folder / "scratchpad").is_dir()
            else f"not a home: {text}"
        )
    return {
        "home": str(Path(folder).expanduser().absolute()),
        "is_home": False,
        "state": state,
        "problem": why,
        "attention": [{"key": state, "text": text}],
        "needs_person": True,
    }


def most_pressing_first(rows: list[dict]) -> list[dict]:
    """Homes sorted by who needs a person: those that do first, then by state (STATES' order), the
    longest silent first, then by path."""

    def rank(row: dict) -> tuple[Any, ...]:
        state = STATES.index(row["state"]) if row["state"] in STATES else 0
        return (not row["needs_person"], state, -(row.get("last_age_s") or 0), row["home"])

    return sorted(rows, key=rank)
