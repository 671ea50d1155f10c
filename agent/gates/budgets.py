"""Budgets across cycles: tokens and money per UTC day and month, from what the cycle records spent
(agent/store/cycles.py: a table the database keeps per day and model, so a cycle reads the same
few rows however long the history).

Each cycle's record carries its `usage` and its `cost` (prompt and completion tokens at
the `prices` of its model, per million tokens; null when the model has no price). Before every
model call the budget gate (`BudgetGate.before_call`) asks `Budgets.problem` whether the day's or
the month's spending (the records by the UTC day and month they started, plus this cycle's usage
so far) has reached a budget; if so the cycle stops with `budget_exhausted` (exit 10) and nothing is sent.

A cost budget needs to know what the model costs: a cost budget with no price for the model
is a usage error (exit 2) before anything is read, written or sent.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any, Callable

from agent.common.outcomes import LimitReached, StopReason, UsageError
from agent.config import Settings
from agent.gates.base import Gate, GateContext
from agent.models.base import Usage
from agent.models.fallback import FallbackModel
from agent.setting_checks import MODEL_BUDGET_KEYS
from agent.state import parse_time
from agent.store.cycles import days, spent
from agent.store.home import Home

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


def bucket_spending(bucket: dict | None, prices: dict[str, dict[str, float]]) -> dict:
    """What a day's or month's records spent (agent/store/cycles.py) at `prices`: cycles, tokens, cost
    (recorded costs, plus records with none priced now) and unpriced cycles (tokens, and no price)."""
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


def period_spending(home: Home, day: str, prices: dict[str, dict[str, float]]) -> dict[str, dict]:
    """{"day": ..., "month": ...}: what the records spent on UTC `day` ('YYYY-MM-DD') and in its month."""
    return {
        "day": bucket_spending(spent(home, day, day), prices),
        "month": bucket_spending(spent(home, day[:7] + "-01", day[:7] + "-31"), prices),
    }


def newest_days(home: Home, prices: dict[str, dict[str, float]], limit: int = 0) -> list[dict]:
    """Per UTC day, newest first, the newest `limit` days with records (0: all): cycles, tokens, cost
    (of the priced cycles) and unpriced cycles (`agent history --daily`)."""
    return [dict(day=day, **bucket_spending(bucket, prices)) for day, bucket in days(home, limit)]


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
        if self.enabled:  # a few rows however long the history (agent/store/cycles.py)
            for period, used in period_spending(home, self.day, settings.prices).items():
                self.earlier[period] = {"tokens": used["tokens"], "cost": used["cost"]}

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


def model_budget_check(home: Home, settings: Settings, now: _dt.datetime) -> Callable[[str], str | None]:
    """For FallbackModel (`model_budgets`): the message when a model has spent a budget of its own,
    counted from what earlier cycles on it spent this UTC day and month; None while it has not."""
    day = utc_day(now.isoformat())

    def used_up(model: str) -> str | None:
        limits = settings.model_budgets.get(model)
        if not limits:
            return None
        today = bucket_spending(spent(home, day, day, model), settings.prices)
        month = bucket_spending(spent(home, day[:7] + "-01", day[:7] + "-31", model), settings.prices)
        used = {
            "daily_tokens": today["tokens"],
            "monthly_tokens": month["tokens"],
            "daily_cost": today["cost"],
            "monthly_cost": month["cost"],
        }
        for key in MODEL_BUDGET_KEYS:
            if key in limits and used[key] >= limits[key]:
                return f"has spent its {key.replace('_', ' ')} budget ({used[key]:g} of {limits[key]:g}; model_budgets)"
        return None

    return used_up


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
