"""Budgets across cycles: daily and monthly tokens and cost, checked from what the cycle records
spent before every model call; a spent budget stops the cycle with exit 10 and sends nothing."""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path

import pytest

from agent.common.outcomes import LimitReached, StopReason, UsageError
from agent.config import Settings
from agent.gates.budgets import BudgetGate, Budgets, cycle_cost, newest_days, record_cost, utc_day
from agent.models.base import Usage
from agent.models.fallback import FallbackModel
from agent.models.scripted import ScriptedModel
from agent.store.cycles import add_record
from agent.store.home import Home
from tests.cli.helpers import done, echo, run_cycle
from tests.gates.helpers import made
from tests.helpers import configure, cycle_records, run_cli, tree_digest
from tests.models.openai_server import OpenAIServer, Reply, usage

KEY = "sk-test-0123456789abcdef0123"
MODEL = "openai:test-model"
PRICE = {MODEL: {"input": 2.0, "output": 10.0}}  # per million tokens
TASK = {"current_task": "say hello", "pending_actions": ["rest"]}
QUICK = {"max_retries": 0, "request_timeout": 5}


@pytest.fixture
def server():
    with OpenAIServer() as srv:
        yield srv


def run(home: Path, server: OpenAIServer):
    """`agent run --json` against the test server: (click Result, the report or None)."""
    result = run_cli(
        "run",
        "--home",
        str(home),
        "--model",
        MODEL,
        "--json",
        env={"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": KEY},
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    return result, (json.loads(lines[-1]) if lines else None)


def index(home: Path) -> list[dict]:
    return cycle_records(home)


def daily_totals(records: list[dict], prices: dict) -> list[dict]:
    """Per UTC day, oldest first, counted record by record: what the database's totals must equal."""
    days: dict[str, dict] = {}
    for record in records:
        day = utc_day(record.get("started"))
        if day is None:
            continue
        total = days.setdefault(day, {"day": day, "cycles": 0, "tokens": 0, "cost": 0.0, "unpriced_cycles": 0})
        usage = record.get("usage") if isinstance(record.get("usage"), dict) else {}
        tokens, cost = usage.get("total_tokens", 0), record_cost(record, prices)
        total["cycles"] += 1
        total["tokens"] += tokens
        if cost is None:
            total["unpriced_cycles"] += tokens > 0
        else:
            total["cost"] = round(total["cost"] + cost, 8)
    return [days[d] for d in sorted(days)]


def store(home: Path, records: list[dict]) -> Home:
    """`records` written as cycles write theirs; the home."""
    h = Home.at(home)
    for record in records:
        add_record(h, record)
    return h


def test_a_spent_daily_token_budget_exits_10_and_sends_nothing(home, server):
    configure(home, TASK, **QUICK, daily_token_budget=1000)
    server.add(Reply.chat(echo("hi"), usage=usage(900, 200)))  # 1,100 tokens: the budget is spent mid-cycle
    result, report = run(home, server)
    assert result.exit_code == 10, result.output
    assert report["stop_reason"] == "budget_exhausted" and len(server.chat_requests) == 1
    result, report = run(home, server)
    assert result.exit_code == 10
    assert len(server.chat_requests) == 1  # the second cycle sent nothing
    assert "daily token budget is spent: 1,100 of 1,000 tokens" in (home / "scratchpad" / "active.yaml").read_text()


def test_the_index_records_each_cycles_cost_at_the_models_price(home, server):
    configure(home, TASK, **QUICK, prices=PRICE)
    server.add(Reply.chat(done("hi"), usage=usage(1000, 100)))
    result, report = run(home, server)
    assert result.exit_code == 0
    expected = (1000 * 2.0 + 100 * 10.0) / 1_000_000
    assert report["cost"] == pytest.approx(expected)
    assert index(home)[-1]["cost"] == pytest.approx(expected)


def test_a_model_without_a_price_records_a_null_cost(home):
    assert run_cycle(home, [done("ok")]).exit_code == 0
    assert index(home)[-1]["cost"] is None


def test_a_spent_daily_cost_budget_exits_10_and_sends_nothing(home, server):
    configure(home, TASK, **QUICK, prices=PRICE, daily_cost_budget=0.002)
    server.add(Reply.chat(done("hi"), usage=usage(1000, 100)))  # 0.003
    assert run(home, server)[0].exit_code == 0
    result, report = run(home, server)
    assert result.exit_code == 10 and report["stop_reason"] == "budget_exhausted"
    assert len(server.chat_requests) == 1


def test_a_cost_budget_for_a_model_with_no_price_exits_2_and_sends_nothing(home, server):
    configure(home, TASK, **QUICK, prices={"openai:other": {"input": 1, "output": 1}}, monthly_cost_budget=5)
    digest = tree_digest(home)
    result, _ = run(home, server)
    assert result.exit_code == 2
    assert "'monthly_cost_budget' needs the price of model 'openai:test-model'" in result.stderr
    assert server.requests == [] and tree_digest(home) == digest


@pytest.mark.parametrize(
    "prices, fragment",
    [
        ({MODEL: {"input": 1}}, f"'prices.{MODEL}' must have exactly the keys input and output"),
        ({MODEL: {"input": 1, "output": 1, "cached": 0.5}}, f"'prices.{MODEL}' must have exactly the keys"),
        ({MODEL: {"input": "cheap", "output": 1}}, f"'prices.{MODEL}.input' must be a number"),
        ({MODEL: {"input": -1, "output": 1}}, f"'prices.{MODEL}.input' must be a number of 0 or more"),
        ({MODEL: 3}, f"'prices.{MODEL}' must be a mapping"),
        ([1, 2], "'prices' must be a mapping"),
    ],
)
def test_prices_with_a_bad_shape_exit_2_naming_the_key(home, server, prices, fragment):
    configure(home, TASK, **QUICK, prices=prices)
    digest = tree_digest(home)
    result, _ = run(home, server)
    assert result.exit_code == 2 and fragment in result.stderr
    assert server.requests == [] and tree_digest(home) == digest


@pytest.mark.parametrize(
    "key", ["daily_token_budget", "monthly_token_budget", "daily_cost_budget", "monthly_cost_budget"]
)
def test_a_budget_of_zero_or_less_exits_2_naming_it(home, server, key):
    configure(home, TASK, **QUICK, **{key: 0})
    result, _ = run(home, server)
    assert result.exit_code == 2 and f"'{key}' must be greater than 0" in result.stderr


def _write_index(home: Path, records: list[tuple[str, int]]) -> None:
    store(
        home,
        [
            {
                "cycle_id": f"c{i:03d}",
                "started": started,
                "model": MODEL,
                "usage": {"prompt_tokens": tokens, "completion_tokens": 0, "total_tokens": tokens},
            }
            for i, (started, tokens) in enumerate(records)
        ],
    )


def test_days_and_months_are_utc_and_only_this_months_records_count(home):
    _write_index(
        home,
        [
            ("2026-10-31T23:59:00+00:00", 5000),  # last month
            ("2026-11-01T00:30:00+01:00", 7000),  # 2026-10-31 23:30 UTC: last month too
            ("2026-11-02T10:00:00+00:00", 300),
            ("2026-11-21T01:00:00+00:00", 40),
        ],
    )
    now = _dt.datetime(2026, 11, 21, 12, 0, tzinfo=_dt.timezone.utc)
    budgets = Budgets(Home.at(home), Settings(daily_token_budget=50, monthly_token_budget=350), MODEL, now)
    assert budgets.problem(Usage()) is None
    assert "daily token budget is spent" in budgets.problem(Usage(prompt_tokens=10))
    assert "monthly token budget is spent: 350 of 350" in Budgets(
        Home.at(home), Settings(monthly_token_budget=350), MODEL, now
    ).problem(Usage(prompt_tokens=10))


def test_a_long_index_counts_back_to_the_start_of_the_month(home):
    _write_index(home, [("2026-11-01T00:00:00+00:00", 1)] * 50 + [("2026-11-21T00:00:00+00:00", 1)])
    now = _dt.datetime(2026, 11, 21, 12, 0, tzinfo=_dt.timezone.utc)
    budgets = Budgets(Home.at(home), Settings(monthly_token_budget=51), MODEL, now)
    assert budgets.problem(Usage()) is not None and budgets.problem(Usage()).startswith("the monthly token")


def test_the_budget_gate_refuses_an_unpriced_cost_budget_and_stops_before_a_call_once_spent(home):
    with pytest.raises(UsageError, match=f"setting 'daily_cost_budget' needs the price of model '{MODEL}'"):
        BudgetGate.check(Settings(daily_cost_budget=1.0), MODEL)
    BudgetGate.check(Settings(daily_cost_budget=1.0, prices=PRICE), MODEL)  # priced: nothing to say
    _write_index(home, [("2024-01-05T08:00:00+00:00", 40)])  # today (the helpers' cycle runs on 2024-01-05)
    gate = made(BudgetGate, home, Settings(daily_token_budget=50), model=ScriptedModel.from_replies([], name=MODEL))
    gate.before_call(Usage(prompt_tokens=9))  # 49 of 50: the call may go
    with pytest.raises(LimitReached, match="daily token budget is spent: 50 of 50 tokens") as stop:
        gate.before_call(Usage(prompt_tokens=10))
    assert stop.value.reason is StopReason.BUDGET_EXHAUSTED


def test_the_budget_gate_tells_a_fallback_model_which_of_its_models_spent_its_own_budget(home):
    _write_index(home, [("2024-01-05T08:00:00+00:00", 40)])  # all spent by MODEL
    models = FallbackModel([ScriptedModel.from_replies([], name=MODEL), ScriptedModel.from_replies([], name="local")])
    made(BudgetGate, home, Settings(model_budgets={MODEL: {"daily_tokens": 40}}), model=models)
    assert "daily tokens budget (40 of 40" in models.spent(MODEL)
    assert models.spent("local") is None


def test_cost_of_usage_and_of_unpriced_models(tmp_path):
    assert cycle_cost(PRICE, MODEL, Usage(prompt_tokens=1_000_000, completion_tokens=500_000)) == 7.0
    assert cycle_cost(PRICE, "openai:unknown", Usage(prompt_tokens=10)) is None
    h = store(
        tmp_path,
        [{"cycle_id": "c1", "started": "2026-11-21T00:00:00+00:00", "model": "x", "usage": {"total_tokens": 5}}],
    )
    assert newest_days(h, PRICE) == [{"day": "2026-11-21", "cycles": 1, "tokens": 5, "cost": 0.0, "unpriced_cycles": 1}]


def _day_records(days: int, per_day: int) -> list[dict]:
    """Index records, oldest first: `per_day` cycles on each of `days` UTC days from 1 November."""
    start = _dt.datetime(2026, 11, 1, tzinfo=_dt.timezone.utc)
    moments = [start + _dt.timedelta(days=d, hours=n) for d in range(days) for n in range(per_day)]
    return [_record(moment, moment) for moment in moments]


def _record(started: _dt.datetime, id_time: _dt.datetime) -> dict:
    return {
        "cycle_id": id_time.strftime("%Y%m%d_%H%M%S") + "_01",
        "started": started.isoformat(),
        "model": MODEL,
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
        "cost": 0.0003,
    }


def test_newest_days_are_the_records_totals_of_those_days_newest_first(tmp_path):
    records = _day_records(9, 3)
    whole = daily_totals(records, PRICE)
    h = store(tmp_path, records)
    assert newest_days(h, PRICE) == whole[::-1]  # 0: every day
    for limit in (1, 2, 5, 9, 20):
        assert newest_days(h, PRICE, limit) == whole[::-1][:limit]


def test_a_clock_that_stepped_back_dates_one_record_a_day_early_and_hides_none(tmp_path):
    """The third of four cycles on 2 January started by a clock an hour slow: it is counted on
    1 January (the day it started) and the others still on 2 January."""
    day = _dt.datetime(2026, 1, 2, 0, 30, tzinfo=_dt.timezone.utc)
    records = [_record(day - _dt.timedelta(days=1), day - _dt.timedelta(days=1))]
    records += [_record(day + _dt.timedelta(minutes=m), day + _dt.timedelta(minutes=m)) for m in (0, 10)]
    records += [_record(day - _dt.timedelta(hours=1), day + _dt.timedelta(minutes=11))]  # slow clock, later id
    records += [_record(day + _dt.timedelta(minutes=20), day + _dt.timedelta(minutes=20))]
    whole = daily_totals(records, PRICE)[::-1]
    assert [(d["day"], d["cycles"]) for d in whole] == [("2026-01-02", 3), ("2026-01-01", 2)]
    h = store(tmp_path, records)
    assert newest_days(h, PRICE, 1) == whole[:1]
    assert newest_days(h, PRICE, 2) == whole


def test_newest_days_skip_records_without_a_time_and_count_unpriced_usage(tmp_path):
    records = [
        {"cycle_id": "c1", "started": "2026-11-21T01:00:00+00:00", "model": "x", "usage": {"total_tokens": 5}},
        {"cycle_id": "c2", "started": "not a time", "usage": {"total_tokens": 7}},
        {"cycle_id": "c3", "started": None},
    ]
    assert newest_days(store(tmp_path, records), PRICE, 1) == [
        {"day": "2026-11-21", "cycles": 1, "tokens": 5, "cost": 0.0, "unpriced_cycles": 1}
    ]


@pytest.mark.parametrize("seed", range(5))
def test_what_the_database_adds_up_equals_the_records_counted_one_by_one(tmp_path, seed):
    """Random records over months and models, some priced now, some with a recorded cost, some
    without usage or a time: the day totals the database keeps equal the records counted by hand."""
    import random

    rng = random.Random(seed)
    start, records = _dt.datetime(2026, 1, 1, tzinfo=_dt.timezone.utc), []
    for n in range(300):
        started = start + _dt.timedelta(hours=rng.randrange(24 * 90))
        record = {"cycle_id": f"c{n:04d}", "started": started.isoformat(), "model": rng.choice([MODEL, "x", 5])}
        if rng.random() < 0.9:
            prompt, completion = rng.randrange(2000), rng.randrange(200)
            record["usage"] = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
        if rng.random() < 0.3:
            record["cost"] = round(rng.random(), 6)
        if rng.random() < 0.05:
            record["started"] = "not a time"
        records.append(record)
    prices = {MODEL: {"input": 2.0, "output": 10.0}}
    assert newest_days(store(tmp_path, records), prices) == daily_totals(records, prices)[::-1]


def test_history_and_status_show_tokens_and_cost_per_cycle_and_per_day(home, server):
    configure(home, TASK, **QUICK, prices=PRICE, daily_token_budget=100000)
    server.add(Reply.chat(done("hi"), usage=usage(1000, 100)), Reply.chat(done("again"), usage=usage(1000, 100)))
    assert run(home, server)[0].exit_code == 0 and run(home, server)[0].exit_code == 0
    table = run_cli("history", "--home", str(home)).stdout.splitlines()
    assert "COST" in table[0] and "0.0030" in table[1]
    records = json.loads(run_cli("history", "--home", str(home), "--json").stdout)
    assert [r["cost"] for r in records] == [pytest.approx(0.003)] * 2
    daily = run_cli("history", "--home", str(home), "--daily").stdout.splitlines()
    assert daily[0].split() == ["DAY", "(UTC)", "CYCLES", "TOKENS", "COST"] and daily[1].split()[1:] == [
        "2",
        "2,200",
        "0.0060",
    ]
    [day] = json.loads(run_cli("history", "--home", str(home), "--daily", "--json").stdout)
    assert day["tokens"] == 2200 and day["cost"] == pytest.approx(0.006)
    status = run_cli("status", "--home", str(home)).stdout
    assert "today:     2 cycle(s), 2,200 tokens of 100,000, cost 0.0060" in status
    spent = json.loads(run_cli("status", "--home", str(home), "--json").stdout)["spending"]
    assert spent["today"]["tokens"] == 2200 and spent["month"]["cost"] == pytest.approx(0.006)


def test_under_quiet_a_spent_budget_prints_one_line_for_cron_mail(home, server):
    configure(home, daily_token_budget=500)
    server.add(Reply.chat(done("hi"), usage=usage(1000, 100)))
    assert run(home, server)[0].exit_code == 0
    result = run_cli(
        "run",
        "--home",
        str(home),
        "--model",
        MODEL,
        "--quiet",
        env={"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": KEY},
    )
    assert result.exit_code == 10 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("agent: budget exhausted, nothing sent to the model: ") and "daily" in line
    assert "(exit 10;" in line


def test_a_model_with_no_price_is_shown_unpriced_never_as_a_zero_cost(home, server):
    configure(home)
    server.add(Reply.chat(done("hi"), usage=usage(1000, 100)))
    assert run(home, server)[0].exit_code == 0
    status = run_cli("status", "--home", str(home)).stdout
    assert "today:     1 cycle(s), 1,100 tokens, cost unpriced" in status and "0.0000" not in status
    table = run_cli("history", "--home", str(home)).stdout.splitlines()
    assert "unpriced" in table[1] and "0.0000" not in table[1]
    daily = run_cli("history", "--home", str(home), "--daily").stdout.splitlines()
    assert daily[1].split()[1:] == ["1", "1,100", "unpriced"]
    spent = json.loads(run_cli("status", "--home", str(home), "--json").stdout)["spending"]
    assert spent["today"]["unpriced_cycles"] == 1


def test_a_spent_budget_is_named_on_the_terminal_and_in_json(home, server):
    configure(home, TASK, **QUICK, daily_token_budget=500)
    server.add(Reply.chat(echo("hi"), usage=usage(1000, 100)))
    assert run(home, server)[0].exit_code == 10
    env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": KEY}
    shown = run_cli("run", "--home", str(home), "--model", MODEL, env=env)
    assert shown.exit_code == 10
    assert shown.stdout.splitlines()[-1] == (
        f"  stopped: the daily token budget is spent: 1,100 of 500 tokens used in UTC day {index(home)[-1]['started'][:10]}"
    )
    result, report = run(home, server)
    assert result.exit_code == 10 and report["error"] is None
    assert report["stop_detail"].startswith("the daily token budget is spent: 1,100 of 500 tokens")
    assert "stop_detail" not in index(home)[-1]  # the record keeps its fields
