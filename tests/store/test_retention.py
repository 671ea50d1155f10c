"""Retention: keep rules select old cycles by id order, delete only their snapshots and logs,
never the newest cycle by age alone, and never what the index and archive hold."""

from __future__ import annotations

import datetime as _dt
import json

import pytest

from agent.common.outcomes import UsageError
from agent.config import Settings, load_settings
from agent.store.home import Home
from agent.store.retention import apply_retention, parse_duration, select_expired
from tests.helpers import run_cli, write_script

NOW = _dt.datetime(2026, 1, 10, tzinfo=_dt.timezone.utc)


def run(home, script, *extra):
    return run_cli("run", "--home", str(home), "--model", f"scripted:{script}", *extra)


def ids_on_disk(home: Home) -> list[str]:
    return sorted(p.name[: -len("_before.yaml")] for p in home.scratchpad.glob("*_before.yaml"))


# ------------------------------------------------------------------------------ selecting


def test_select_expired_applies_each_keep_rule_and_removes_only_what_none_keeps():
    ids = ["20260101_000000", "20260105_000000", "20260109_000000", "20260109_000000_02"]
    assert select_expired(ids) == []
    assert select_expired(ids, keep_cycles=2) == ids[:2]
    assert select_expired(ids, keep_cycles=0) == ids
    assert select_expired(ids, keep_days=3, now=NOW) == ids[:2]
    assert select_expired(ids, keep_cycles=3, keep_days=3, now=NOW) == ids[:1]
    assert select_expired(ids, keep_cycles=0, protect=[ids[-1]]) == ids[:-1]


def test_select_expired_keeps_everything_while_there_are_fewer_ids_than_the_limit():
    assert select_expired(["20260101_000000", "20260101_000100"], keep_cycles=3) == []
    assert select_expired(["a1", "a2", "a3", "a4"], keep_cycles=3) == ["a1"]


def test_keep_days_never_removes_the_newest_cycle():
    """A home whose cron stopped for a month, or a clock now running fast, keeps its last cycle."""
    ids = ["20251201_000000_01", "20251202_000000_01", "20251203_000000_01"]
    assert select_expired(ids, keep_days=7, now=NOW) == ids[:2]
    assert select_expired(ids, keep_days=7, now=NOW.replace(year=2030)) == ids[:2]


def test_a_clock_that_ran_fast_does_not_get_the_newest_cycles_pruned(home, start_cycle):
    h = Home.at(home)
    h.ensure_dirs()
    fast = [start_cycle(h, NOW.replace(year=2030)) for _ in range(2)]  # then the clock is corrected
    newest = [start_cycle(h, NOW + _dt.timedelta(minutes=m)) for m in range(2)]
    assert ids_on_disk(h) == fast + newest
    apply_retention(h, Settings(keep_cycles=2), now=NOW)
    assert ids_on_disk(h) == newest
    apply_retention(h, Settings(keep_days=1), now=NOW)
    assert ids_on_disk(h) == newest


@pytest.mark.parametrize(
    "text, seconds", [("90s", 90), ("30m", 1800), ("12h", 43200), ("7d", 604800), ("2w", 1209600), ("1.5D", 129600)]
)
def test_parse_duration_reads_a_number_and_a_unit(text, seconds):
    assert parse_duration(text) == seconds


# ------------------------------------------------------------------------------- deleting


def test_apply_retention_follows_settings_and_spares_the_protected_cycle(home, start_cycle):
    h = Home.at(home)
    h.ensure_dirs()
    ids = [start_cycle(h, NOW) for _ in range(4)]
    assert apply_retention(h, Settings()) == []
    deleted = apply_retention(h, Settings(keep_cycles=1), protect=[ids[0]])
    assert {p.name for p in deleted} == {f"{i}_{label}.yaml" for i in ids[1:3] for label in ("before", "after")} | {
        f"cycle_{i}.log" for i in ids[1:3]
    }
    assert ids_on_disk(h) == [ids[0], ids[3]]


# --------------------------------------------------------------------------- through cycles


def test_automatic_retention_keeps_the_newest_cycles_and_all_history(home, tmp_path):
    (home / "config.yaml").write_text("keep_cycles: 2\n")
    script = write_script(tmp_path, [{"tool": "done", "args": {"summary": "ok"}}])
    ids = [json.loads(run(home, script, "--json").stdout)["cycle_id"] for _ in range(4)]
    left = sorted(p.name for p in (home / "scratchpad").iterdir())
    assert left == sorted([f"{i}_{label}.yaml" for i in ids[-2:] for label in ("before", "after")] + ["active.yaml"])
    assert sorted(p.name for p in (home / "logs").glob("cycle_*.log")) == [f"cycle_{i}.log" for i in ids[-2:]]
    index = [json.loads(line)["cycle_id"] for line in (home / "logs/index.jsonl").read_text().splitlines()]
    assert index == ids  # the index still lists every cycle


def test_retention_is_on_by_default_and_can_be_turned_off(home):
    assert load_settings(home, env={}).keep_cycles == 500
    (home / "config.yaml").write_text("keep_cycles: null\n")
    assert load_settings(home, env={}).keep_cycles is None


def test_retention_keeps_everything_while_there_are_fewer_cycles_than_the_limit(home, tmp_path):
    (home / "config.yaml").write_text("keep_cycles: 3\n")
    script = write_script(tmp_path, [{"tool": "done", "args": {"summary": "ok"}}])
    for expected in (1, 2, 3, 3):
        assert run(home, script).exit_code == 0
        assert len(list((home / "scratchpad").glob("*_before.yaml"))) == expected


def test_retention_settings_load_and_keep_cycles_0_is_refused(home):
    (home / "config.yaml").write_text("keep_cycles: 5\nkeep_days: 1.5\n")
    settings = load_settings(home)
    assert (settings.keep_cycles, settings.keep_days) == (5, 1.5)
    (home / "config.yaml").write_text("keep_cycles: 0\n")
    with pytest.raises(UsageError, match="keep_cycles"):
        load_settings(home)
