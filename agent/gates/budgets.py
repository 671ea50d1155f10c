"""Budgets across cycles: tokens and money per UTC day and month, from logs/index.jsonl (through its
running totals, logs/totals.json, so a cycle reads O(1) however long the history).

Each cycle's index record carries its `usage` and its `cost` (prompt and completion tokens at
the `prices` of its model, per million tokens; null when the model has no price). Before every
model call the budget gate (`BudgetGate.before_call`) asks `Budgets.problem` whether the day's or the month's spending (the
index's records by the UTC day and month they started, plus this cycle's usage so far) has
reached a budget; if so the cycle stops with `budget_exhausted` (exit 10) and nothing is sent.

A cost budget needs to know what the model costs: a cost budget with no price for the model
is a usage error (exit 2) before anything is read, written or sent.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any, Callable, Iterable

from agent.common.outcomes import LimitReached, StopReason, UsageError
from agent.config import Settings
from agent.gates.base import Gate, GateContext
from agent.models.base import Usage
from agent.models.fallback import FallbackModel
from agent.setting_checks import MODEL_BUDGET_KEYS
from agent.state import parse_time
from agent.store.home import Home, read_index
from agent.store.ids import cycle_started
from agent.store.totals import Totals, load_totals

FIRST_TAIL_BYTES = 256 * 1024  # a month of index records is read from the end, growing until it is all there

COST_BUDGETS = ("daily_cost_budget", "monthly_cost_budget")


def cycle_cost(prices: dict[str, dict[str, float]], model: Any, usage: Any) -> float | None:
    """What `usage` (a Usage or an index record's usage dict) cost at `model`'s price; None: no price."""
    price = prices.get(model) if isinstance(model, str) else None
    if isinstance(usage, Usage):
        usage = usage.as_dict()
    if price is None or not isinstance(usage, dict):
        return None
    prompt, completion = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
    return round((prompt * price["input"] + completion * price["output"]) / 1_000_000, 8)


def record_cost(record: dict, prices: dict[str, dict[str, float]]) -> float | None:
    """A record's cost: as recorded, or (older records, prices added later) at today's prices."""
    cost = record.get("cost")
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        return float(cost)
    return cycle_cost(prices, record.get("model"), record.get("usage"))


def record_tokens(record: dict) -> int:
    usage = record.get("usage")
    return _count(usage.get("total_tokens")) if isinstance(usage, dict) else 0


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def utc_day(started: Any) -> str | None:
    """'YYYY-MM-DD', the UTC day an ISO time stamp falls on (naive stamps are UTC); None if not one."""
    when = parse_time(started)
    return None if when is None else when.astimezone(_dt.timezone.utc).strftime("%Y-%m-%d")


def daily_totals(records: Iterable[dict], prices: dict[str, dict[str, float]]) -> list[dict]:
    """Per UTC day, oldest first: cycles, tokens, cost (of the priced cycles) and unpriced cycles."""
    days: dict[str, dict] = {}
    for record in records:
        _add_to_day(days, record, prices)
    return [days[d] for d in sorted(days)]


def newest_days(records: Iterable[dict], prices: dict[str, dict[str, float]], limit: int = 0) -> list[dict]:
    """`daily_totals` of the newest `limit` days (0: all), newest first, from `records` given newest
    first (the index read backwards), so that time and memory grow with the days shown, not with the
    history. Every record counts, as in the running totals that budgets and `status` read.

    A record is counted in the day it `started`, and reading stops at the first record whose cycle
    id is dated before the oldest of the `limit` newest days found: ids keep running order even when
    the clock steps back, and a cycle never started after the time in its id, so every record
    further back started before that day too (a clock that stepped back dates a record into an
    earlier day, but never hides the records around it)."""
    days: dict[str, dict] = {}
    oldest_shown = None  # with `limit` days found: the oldest of the newest `limit`
    for record in records:
        if oldest_shown is not None and _id_day(record) < oldest_shown:
            break
        known = len(days)
        _add_to_day(days, record, prices)
        if limit and len(days) >= limit and len(days) != known:
            oldest_shown = sorted(days, reverse=True)[limit - 1]
    return [days[d] for d in sorted(days, reverse=True)[: limit or None]]


def _id_day(record: dict) -> str:
    """'YYYY-MM-DD' of the time in a record's cycle id; '9999-12-31' (never stops the reading) if none."""
    cycle_id = record.get("cycle_id")
    started = cycle_started(cycle_id) if isinstance(cycle_id, str) else None
    return "9999-12-31" if started is None else started.strftime("%Y-%m-%d")


def _add_to_day(days: dict[str, dict], record: dict, prices: dict[str, dict[str, float]]) -> None:
    day = utc_day(record.get("started"))
    if day is None or record.get("source", "index") != "index":
        return
    total = days.setdefault(day, {"day": day, "cycles": 0, "tokens": 0, "cost": 0.0, "unpriced_cycles": 0})
    cost = record_cost(record, prices)
    total["cycles"] += 1
    total["tokens"] += record_tokens(record)
    if cost is None:
        total["unpriced_cycles"] += record_tokens(record) > 0
    else:
        total["cost"] = round(total["cost"] + cost, 8)


def bucket_spending(bucket: dict | None, prices: dict[str, dict[str, float]]) -> dict:
    """A day's or month's running totals (agent/store/totals.py) at `prices`: cycles, tokens, cost (recorded
    costs, plus records with none priced now) and unpriced cycles, as `daily_totals` counts them."""
    if not bucket:
        return {"cycles": 0, "tokens": 0, "cost": 0.0, "unpriced_cycles": 0}
    cost, unpriced = float(bucket["cost"]), 0
    for model, (cycles, prompt, completion) in sorted(bucket["uncosted"].items()):
        price = prices.get(model) if model else None
        if price is None:
            unpriced += cycles
        else:
            cost = round(cost + (prompt * price["input"] + completion * price["output"]) / 1_000_000, 8)
    return {"cycles": bucket["cycles"], "tokens": bucket["tokens"], "cost": cost, "unpriced_cycles": unpriced}


def period_spending(totals: Totals, day: str, prices: dict[str, dict[str, float]]) -> dict[str, dict]:
    """{"day": ..., "month": ...}: what the index's cycles spent on UTC `day` ('YYYY-MM-DD') and in its month."""
    return {
        "day": bucket_spending(totals.days.get(day), prices),
        "month": bucket_spending(totals.months.get(day[:7]), prices),
    }


def check_prices(settings: Settings, model: str) -> None:
    """A cost budget needs the model's price: UsageError (exit 2) naming the setting when it has none."""
    for name in COST_BUDGETS:
        if getattr(settings, name) is not None and model not in settings.prices:
            raise UsageError(
                f"setting '{name}' needs the price of model '{model}', and 'prices' has none "
                f"(add prices: {{{model}: {{input: USD_PER_MTOK, output: USD_PER_MTOK}}}} to "
                f"config.yaml); nothing was sent"
            )


class Budgets:
    """The daily and monthly budgets of one cycle: what earlier cycles spent, read once at its start."""

    def __init__(self, home: Home, settings: Settings, model: str, now: _dt.datetime):
        self.settings, self.model = settings, model
        check_prices(settings, model)
        self.day = utc_day(now.isoformat())
        self.earlier = {"day": {"tokens": 0, "cost": 0.0}, "month": {"tokens": 0, "cost": 0.0}}
        if self.enabled:  # the running totals: O(1) however long the history (agent/store/totals.py)
            for period, spent in period_spending(load_totals(home, now), self.day, settings.prices).items():
                self.earlier[period] = {"tokens": spent["tokens"], "cost": spent["cost"]}

    @property
    def enabled(self) -> bool:
        return self.settings.budgeted

    def problem(self, usage: Usage) -> str | None:
        """Which budget is spent, with this cycle's `usage` so far counted in; None: none is."""
        spent = self.spent(usage)
        return None if spent is None else spent[0]

    def spent(self, usage: Usage) -> tuple[str, str] | None:
        """(what `problem` says, the budget and its period: `daily token budget, UTC day 2026-11-24`, one
        incident per budget period), or None: no budget is spent."""
        s = self.settings
        cost_now = cycle_cost(s.prices, self.model, usage) or 0.0
        checks = (
            ("daily", "day", "tokens", s.daily_token_budget, usage.total_tokens),
            ("monthly", "month", "tokens", s.monthly_token_budget, usage.total_tokens),
            ("daily", "day", "cost", s.daily_cost_budget, cost_now),
            ("monthly", "month", "cost", s.monthly_cost_budget, cost_now),
        )
        for name, period, unit, budget, now in checks:
            if budget is None:
                continue
            spent = self.earlier[period][unit] + now
            if spent >= budget:
                shown = f"{spent:,} of {budget:,} tokens" if unit == "tokens" else f"{spent:.4f} of {budget:g}"
                when = f"UTC day {self.day}" if period == "day" else f"UTC month {self.day[:7]}"
                budget_name = f"{name} {unit.rstrip('s')} budget"
                return f"the {budget_name} is spent: {shown} used in {when}", f"{budget_name}, {when}"
        return None


def month_records(home: Home, now: _dt.datetime) -> list[dict]:
    """The index records of `now`'s UTC month (and perhaps a few before), oldest first: read from the
    index's end, so the cost follows one month's cycles, never the whole history (model_budgets only)."""
    month = now.astimezone(_dt.timezone.utc).strftime("%Y-%m")
    try:
        size = home.index.stat().st_size
    except FileNotFoundError:
        return []
    tail = FIRST_TAIL_BYTES
    while True:
        records = read_index(home, tail_bytes=None if tail >= size else tail)
        if tail >= size or not records or (utc_day(records[0].get("started")) or month) < month:
            return records
        tail *= 4


def model_budget_check(home: Home, settings: Settings, now: _dt.datetime) -> Callable[[str], str | None]:
    """For FallbackModel (`model_budgets`): the message when a model has spent a budget of its own,
    counted from earlier cycles' index records that name it (this month's, read once, when first
    asked); None while it has not."""
    day, month = utc_day(now.isoformat()), now.astimezone(_dt.timezone.utc).strftime("%Y-%m")
    read: list[list[dict]] = []

    def spent(model: str) -> str | None:
        limits = settings.model_budgets.get(model)
        if not limits:
            return None
        if not read:
            read.append(month_records(home, now))
        mine = [r for r in read[0] if r.get("model") == model and (utc_day(r.get("started")) or "")[:7] == month]
        today = [r for r in mine if utc_day(r.get("started")) == day]
        used = {
            "daily_tokens": sum(map(record_tokens, today)),
            "monthly_tokens": sum(map(record_tokens, mine)),
            "daily_cost": sum(record_cost(r, settings.prices) or 0.0 for r in today),
            "monthly_cost": sum(record_cost(r, settings.prices) or 0.0 for r in mine),
        }
        for key in MODEL_BUDGET_KEYS:
            if key in limits and used[key] >= limits[key]:
                return f"has spent its {key.replace('_', ' ')} budget ({used[key]:g} of {limits[key]:g}; model_budgets)"
        return None

    return spent


class BudgetGate(Gate):
    """The daily and monthly budgets: before each model call, a spent one stops the cycle with
    budget_exhausted (exit 10) and nothing is sent. A FallbackModel is told which of its models has
    spent its own `model_budgets`, so the cycle goes on with the next."""

    @classmethod
    def check(cls, settings: Settings, model_name: str) -> None:
        check_prices(settings, model_name)

    def __init__(self, cycle: GateContext):
        super().__init__(cycle)
        settings, model = cycle.settings, cycle.model
        self.budgets = Budgets(cycle.home, settings, model.name, cycle.now) if settings.budgeted else None
        if settings.model_budgets and isinstance(model, FallbackModel):
            model.spent = model_budget_check(cycle.home, settings, cycle.now)

    def before_call(self, usage: Usage) -> None:
        spent = self.budgets.spent(usage) if self.budgets else None
        if spent:
            raise LimitReached(StopReason.BUDGET_EXHAUSTED, *spent)
