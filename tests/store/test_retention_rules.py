"""Retention rules (agent.retention): which cycles a keep rule lets go, durations, settings.

The commands that apply them are tested in tests/cli/test_maintain.py (agent prune) and
tests/test_memory.py (automatic retention after a cycle).
"""

from __future__ import annotations

import datetime as _dt

import pytest

from agent import retention
from agent.config import Settings, load_settings
from agent.outcomes import UsageError
from agent.scratchpad import Home
from tests.helpers import run_cli, write_script


@pytest.fixture
def four_cycles(home, tmp_path) -> Home:
    script = write_script(tmp_path, [{"tool": "done", "args": {"summary": "ok"}}])
    for _ in range(4):
        assert run_cli("run", "--home", str(home), "--model", f"scripted:{script}").exit_code == 0
    return Home.at(home)


def test_select_expired_lets_a_cycle_go_only_when_no_rule_keeps_it():
    ids = ["20260101_000000", "20260105_000000", "20260109_000000", "20260109_000000_02"]
    now = _dt.datetime(2026, 1, 10, tzinfo=_dt.timezone.utc)
    assert retention.select_expired(ids) == []
    assert retention.select_expired(ids, keep_cycles=2) == ids[:2]
    assert retention.select_expired(ids, keep_cycles=0) == ids
    assert retention.select_expired(ids, keep_days=3, now=now) == ids[:2]
    assert retention.select_expired(ids, keep_cycles=3, keep_days=3, now=now) == ids[:1]
    assert retention.select_expired(ids, keep_cycles=0, protect=[ids[-1]]) == ids[:-1]


@pytest.mark.parametrize("text, seconds", [("90s", 90), ("30m", 1800), ("12h", 43200), ("7d", 604800),
                                           ("2w", 1209600), ("1.5D", 129600)])
def test_parse_duration_reads_a_number_and_a_unit_as_seconds(text, seconds):
    assert retention.parse_duration(text) == seconds


def test_apply_retention_follows_settings_and_spares_the_protected_cycle(four_cycles):
    ids = retention.cycles_on_disk(four_cycles)
    assert retention.apply_retention(four_cycles, Settings()) == []
    deleted = retention.apply_retention(four_cycles, Settings(keep_cycles=1), protect=[ids[0]])
    assert {p.name for p in deleted} >= {f"{ids[1]}_before.yaml", f"cycle_{ids[2]}.log"}
    assert retention.cycles_on_disk(four_cycles) == [ids[0], ids[3]]


def test_retention_settings_load_and_keep_cycles_0_is_refused(home):
    (home / "config.yaml").write_text("keep_cycles: 5\nkeep_days: 1.5\n")
    settings = load_settings(home)
    assert (settings.keep_cycles, settings.keep_days) == (5, 1.5)
    (home / "config.yaml").write_text("keep_cycles: 0\n")
    with pytest.raises(UsageError, match="keep_cycles"):
        load_settings(home)
