"""`agent history --since/--until/--stop-reason/--no-idle`: pure filters over the records, reading
the records back only as far as they need; each failed cycle's reason on one escaped line."""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path

import pytest

from agent.cli.history import Shown, parse_when, table_lines
from agent.store.cycles import add_record
from agent.store.db import close_all
from tests.helpers import run_cli, store_home, tree_digest

NOW = _dt.datetime(2026, 11, 24, 12, 0, tzinfo=_dt.timezone.utc)


def record(cycle_id: str, reason: str, **fields) -> dict:
    started = _dt.datetime.strptime(cycle_id[:15], "%Y%m%d_%H%M%S").replace(tzinfo=_dt.timezone.utc)
    return {
        "cycle_id": cycle_id,
        "started": started.isoformat(),
        "stop_reason": reason,
        "exit_code": {"done": 0, "idle": 0, "error": 4, "held": 9, "stalled": 9}.get(reason, 3),
        "task_before": "t",
        "task_after": "t",
        "usage": {"total_tokens": 10},
        **fields,
    }


@pytest.fixture
def weeks(home: Path) -> Path:
    """Three weeks of history: a done a day, idle ticks, a failure and a stall with its held ticks."""
    records = []
    for day in range(3, 25):
        records.append(record(f"202611{day:02}_080000_01", "done"))
        records.append(record(f"202611{day:02}_081500_01", "idle"))
    records.append(record("20261120_090000_01", "error", error="ModelError: HTTP 503\nand \x1b[2J more"))
    records.append(record("20261122_090000_01", "stalled"))
    records.append(record("20261122_091500_01", "held", held_for="stalled"))
    records.sort(key=lambda r: r["cycle_id"])
    for one in records:
        add_record(store_home(home), one)
    close_all()
    return home


def shown(home: Path, *flags: str) -> list[str]:
    result = run_cli("history", "--home", str(home), "--json", "--limit", "0", *flags)
    assert result.exit_code == 0, result.output
    return [r["cycle_id"] for r in json.loads(result.stdout)]


def test_since_and_until_bound_when_a_cycle_started(weeks):
    ids = shown(weeks, "--since", "2026-11-23", "--until", "2026-11-24")
    assert ids == ["20261123_081500_01", "20261123_080000_01"]  # newest first, the 24th left out
    assert shown(weeks, "--since", "2026-11-24T08:10") == ["20261124_081500_01"]


def test_stop_reason_keeps_only_those_and_may_be_repeated(weeks):
    assert shown(weeks, "--stop-reason", "error") == ["20261120_090000_01"]
    assert shown(weeks, "--stop-reason", "stalled", "--stop-reason", "held") == [
        "20261122_091500_01",
        "20261122_090000_01",
    ]


def test_no_idle_hides_idle_and_held_cycles(weeks):
    ids = shown(weeks, "--no-idle", "--since", "2026-11-22")
    assert ids == ["20261124_080000_01", "20261123_080000_01", "20261122_090000_01", "20261122_080000_01"]


def test_limit_counts_the_cycles_shown(weeks):
    result = run_cli("history", "--home", str(weeks), "--json", "--limit", "2", "--no-idle")
    assert [r["cycle_id"] for r in json.loads(result.stdout)] == ["20261124_080000_01", "20261123_080000_01"]


def test_a_failed_cycle_shows_why_on_one_escaped_line(weeks):
    out = run_cli("history", "--home", str(weeks), "--stop-reason", "error").stdout
    lines = out.splitlines()
    assert len(lines) == 3 and lines[2] == "  error: ModelError: HTTP 503 and \\x1b[2J more"
    assert "\x1b" not in out


def test_a_held_cycle_says_what_it_waits_on(weeks):
    out = run_cli("history", "--home", str(weeks), "--stop-reason", "held").stdout
    assert "held (stalled)" in out.splitlines()[1]


def test_daily_takes_since_and_until(weeks):
    result = run_cli(
        "history", "--home", str(weeks), "--daily", "--json", "--since", "2026-11-22", "--until", "2026-11-24"
    )
    assert [d["day"] for d in json.loads(result.stdout)] == ["2026-11-23", "2026-11-22"]


def test_daily_refuses_filters_that_would_change_its_counts(weeks):
    result = run_cli("history", "--home", str(weeks), "--daily", "--no-idle")
    assert result.exit_code == 2 and "--daily counts every cycle of a day" in result.stderr


@pytest.mark.parametrize("bad", ["yesterday", "7 days", "2026-13-01", ""])
def test_a_bad_time_is_one_line_and_exit_2_and_nothing_is_written(weeks, bad):
    before = tree_digest(weeks)
    result = run_cli("history", "--home", str(weeks), "--since", bad)
    assert result.exit_code == 2 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("agent: error:") and "is not a time" in line
    assert tree_digest(weeks) == before


def test_an_unknown_stop_reason_is_exit_2_naming_the_choices(weeks):
    result = run_cli("history", "--home", str(weeks), "--stop-reason", "nope")
    assert result.exit_code == 2 and "'nope' is not one of" in result.stderr


def test_when_is_a_date_an_iso_time_or_a_duration_ago():
    assert parse_when("2026-11-20", NOW) == _dt.datetime(2026, 11, 20, tzinfo=_dt.timezone.utc)
    assert parse_when("2026-11-20T08:30+01:00", NOW) == _dt.datetime(2026, 11, 20, 7, 30, tzinfo=_dt.timezone.utc)
    assert parse_when("7d", NOW) == NOW - _dt.timedelta(days=7)
    assert parse_when(" 12h ", NOW) == NOW - _dt.timedelta(hours=12)


def test_since_reads_the_records_back_only_as_far_as_it_goes():
    window = Shown(since=_dt.datetime(2026, 11, 23, tzinfo=_dt.timezone.utc))
    assert not window.past(record("20261123_000000_01", "done"))
    assert window.past(record("20261122_235959_01", "done"))
    assert not Shown().past(record("19990101_000000_01", "done"))


def test_the_error_line_fits_the_terminal():
    rows = table_lines([record("20261120_090000_01", "error", error="x" * 500)], 80)
    assert len(rows[-1]) <= 80 and rows[-1].startswith("  error: xxx")
