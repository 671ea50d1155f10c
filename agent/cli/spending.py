"""What `status` and `history` say about stalls and spending: tokens and cost per cycle and per
day, against the daily and monthly budgets (agent/gates/budgets.py, agent/gates/stalls.py)."""

from __future__ import annotations

import datetime as _dt
from typing import Any, Iterable, Iterator

from agent.cli.common import home_settings
from agent.cli.history import cost_text, money
from agent.common.escape import escape_controls
from agent.config import Settings
from agent.gates.budgets import period_spending, record_cost, utc_day
from agent.gates.stalls import stall_status
from agent.store.archive import newest_replaced
from agent.store.home import Home


def with_costs(records: Iterable[dict], prices: dict) -> Iterator[dict]:
    """Records with `cost` filled in where the record lacks it and the model now has a price."""
    return (dict(r, cost=record_cost(r, prices)) if r.get("source", "index") == "index" else r for r in records)


def spending(home: Home, settings: Settings, now: _dt.datetime | None = None) -> dict:
    """Today's and this month's tokens and cost (UTC), from what the records spent, with the budgets that apply."""
    today = utc_day((now or _dt.datetime.now(_dt.timezone.utc)).isoformat())
    spent = period_spending(home, today, settings.prices)
    day, month = spent["day"], spent["month"]
    return {
        "today": {
            "day": today,
            "cycles": day["cycles"],
            "tokens": day["tokens"],
            "cost": round(day["cost"], 8),
            "unpriced_cycles": day["unpriced_cycles"],
            "token_budget": settings.daily_token_budget,
            "cost_budget": settings.daily_cost_budget,
        },
        "month": {
            "month": today[:7],
            "cycles": month["cycles"],
            "tokens": month["tokens"],
            "cost": round(month["cost"], 8),
            "unpriced_cycles": month["unpriced_cycles"],
            "token_budget": settings.monthly_token_budget,
            "cost_budget": settings.monthly_cost_budget,
        },
    }


def _period_line(period: dict) -> str:
    tokens = f"{period['tokens']:,} tokens" + (f" of {period['token_budget']:,}" if period["token_budget"] else "")
    cost = f", cost {cost_text(period['cost'], period['unpriced_cycles'])}" + (
        f" of {money(period['cost_budget'])}" if period["cost_budget"] else ""
    )
    return f"{period['cycles']} cycle(s), {tokens}{cost}"


def status_extras(newest_first: Iterable[dict], home: Home, current_task: Any) -> tuple[dict, list[str]]:
    """(status --json's stall and spending, status's lines for them), from the records newest first
    (read only as far as the streak goes) and what the records spent."""
    settings = home_settings(home.root)
    stall = stall_status(newest_first, current_task, settings.stall_cycles, newest_replaced(home))
    spent = spending(home, settings)
    lines = [f"today:     {_period_line(spent['today'])}", f"month:     {_period_line(spent['month'])}"]
    if stall and stall.get("held"):
        lines.append(f"stall:     stalled: {escape_controls(stall['text'])}")
        lines.append(f"           {escape_controls(stall['held'])}")
    elif stall:
        lines.append(
            f"stall:     {'stalled: ' if stall['stalled'] else ''}{escape_controls(stall['text'])}"
            + ("" if stall["stalled"] else f" ({stall['cycles']} of {stall['stall_cycles']} cycles)")
        )
    return {"stall": stall, "spending": spent}, lines


DAILY_HEADERS = ["DAY (UTC)", "CYCLES", "TOKENS", "COST"]


def daily_lines(days: list[dict], width: int | None = None) -> list[str]:
    """`history --daily`: the rows of `newest_days` (newest first, as given), aligned. `width` is unused:
    these rows are short (the argument matches the per-cycle table's)."""
    rows = [[d["day"], str(d["cycles"]), f"{d['tokens']:,}", cost_text(d["cost"], d["unpriced_cycles"])] for d in days]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(DAILY_HEADERS)]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in [DAILY_HEADERS, *rows]]
