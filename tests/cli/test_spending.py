"""What `status` and `history` say about stalls and spending (agent/cli/spending.py), from real
cycle records and what the database adds up: today's and this month's tokens and cost against the
budgets, a cost never shown as a false 0, and a task's streak."""

from __future__ import annotations

import datetime as dt

import pytest

from agent.cli.spending import daily_lines, spending, status_extras, with_costs
from agent.config import Settings
from agent.store.cycles import add_record, newest_first
from agent.store.home import Home
from tests.helpers import store_home

PRICES = {"openai:m": {"input": 2.0, "output": 8.0}}
NOW = dt.datetime.now(dt.timezone.utc)


def _record(n: int, model: str = "openai:m", started: dt.datetime = NOW, **fields) -> dict:
    return {
        "cycle_id": f"20260101_0000{n:02d}_01",
        "started": started.isoformat(),
        "model": model,
        "stop_reason": "max_iterations",
        "task_after": "the task",
        "usage": {"prompt_tokens": 500_000, "completion_tokens": 125_000, "total_tokens": 625_000},
        "cost": None,
        **fields,
    }


@pytest.fixture
def spent(home) -> Home:
    """Three cycles today (two priced at 2.0 each, one of an unpriced model), one over a year ago."""
    h = store_home(home)
    add_record(h, _record(0, started=NOW - dt.timedelta(days=400)))
    for n, model in enumerate(["openai:m", "openai:m", "openai:free"], 1):
        add_record(h, _record(n, model))
    return h


def test_spending_counts_today_and_this_month_against_the_budgets(spent: Home):
    settings = Settings(prices=PRICES, daily_token_budget=2_000_000, monthly_cost_budget=10.0)
    data = spending(spent, settings, NOW)
    today = data["today"]
    assert today["day"] == NOW.strftime("%Y-%m-%d") and today["cycles"] == 3 and today["tokens"] == 1_875_000
    assert today["cost"] == 4.0 and today["unpriced_cycles"] == 1
    assert today["token_budget"] == 2_000_000 and today["cost_budget"] is None
    month = data["month"]
    assert month["month"] == NOW.strftime("%Y-%m") and month["cycles"] == 3 and month["cost_budget"] == 10.0


def test_with_costs_prices_old_records_and_keeps_recorded_costs():
    records = [_record(1), _record(2, cost=0.5), _record(3, "openai:free"), {"cycle_id": "x", "source": "killed"}]
    costs = [r.get("cost") for r in with_costs(records, PRICES)]
    assert costs == [2.0, 0.5, None, None]
    assert "cost" not in list(with_costs(records, PRICES))[3]  # a cycle with no record is left as it is


def test_status_lines_say_spending_and_the_streak(spent: Home):
    (spent.root / "config.yaml").write_text("stall_cycles: 3\nprices: {openai:m: {input: 2.0, output: 8.0}}\n")
    data, lines = status_extras(newest_first(spent), spent, "the task")
    assert data["stall"]["cycles"] == 4 and data["stall"]["stalled"]
    assert lines[0] == "today:     3 cycle(s), 1,875,000 tokens, cost 4.0000 (+1 unpriced)"
    assert lines[1] == "month:     3 cycle(s), 1,875,000 tokens, cost 4.0000 (+1 unpriced)"
    assert lines[2] == "stall:     stalled: task 'the task' has ended 4 cycles in a row without done"


def test_a_streak_below_the_threshold_says_how_far_and_a_model_written_task_is_escaped(home):
    h = store_home(home)
    task = "evil\x1b[2J task"
    add_record(h, _record(1, task_after=task))
    (home / "config.yaml").write_text("stall_cycles: [broken\n")  # a broken config: the defaults
    data, lines = status_extras(newest_first(h), h, task)
    assert data["stall"]["stall_cycles"] == Settings().stall_cycles
    assert lines[-1].endswith(f"(1 of {Settings().stall_cycles} cycles)") and "\x1b" not in lines[-1]
    assert lines[0] == "today:     1 cycle(s), 625,000 tokens, cost unpriced"


def test_no_task_and_no_cycles_say_nothing_of_a_streak(home):
    h = Home.at(home)
    data, lines = status_extras(newest_first(h), h, None)
    assert data["stall"] is None and lines == ["today:     0 cycle(s), 0 tokens, cost 0.0000"] + [
        "month:     0 cycle(s), 0 tokens, cost 0.0000"
    ]


def test_daily_lines_are_aligned_under_their_headers():
    days = [
        {"day": "2026-01-02", "cycles": 12, "tokens": 1_234_567, "cost": 1.5, "unpriced_cycles": 0},
        {"day": "2026-01-01", "cycles": 1, "tokens": 10, "cost": 0.0, "unpriced_cycles": 1},
    ]
    assert daily_lines(days) == [
        "DAY (UTC)   CYCLES  TOKENS     COST",
        "2026-01-02  12      1,234,567  1.5000",
        "2026-01-01  1       10         unpriced",
    ]
