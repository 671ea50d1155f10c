"""After a cycle (agent/after/aftercare.py): the cycle's record first, then retention, the metrics
file and the hook; none of them can cost the cycle its result."""

from __future__ import annotations

import datetime as dt
import json
import sys

import pytest

from agent.after.aftercare import after_cycle
from agent.after.report import CycleReport
from agent.common.outcomes import DiskError
from agent.config import Settings
from agent.gates.approvals import park_call
from agent.models.base import Usage
from agent.secrets import Secrets
from agent.store.cycles import disk, new_cycle_id
from agent.store.db import any_rows
from agent.store.home import Home
from tests.helpers import cycle_records, store_home, stored_bytes
from tests.store.faults import read_only

SECRET = "sk-aftercare-0123456789"


def _cycle(home: Home, minute: int) -> CycleReport:
    """A finished cycle's files (snapshot pair and log) and its report."""
    now = dt.datetime(2026, 1, 1, 0, minute, tzinfo=dt.timezone.utc)
    cycle_id = new_cycle_id(home, now)
    for label in ("before", "after"):
        home.snapshot(cycle_id, label).write_text("{}\n")
    home.cycle_log(cycle_id).write_text("a log line\n")
    report = CycleReport(cycle_id, now.isoformat(), "openai:gpt-x", usage=Usage(1_000_000, 500_000, 0, 1))
    report.task_after = f"use {SECRET}"
    return report


def test_the_record_is_appended_redacted_with_its_cost_and_pending_approvals(home):
    h = store_home(home)
    report = _cycle(h, 0)
    park_call(h, report.cycle_id, "shell", {"command": "rm -rf build"})
    lines: list[str] = []
    settings = Settings(prices={"openai:gpt-x": {"input": 2.0, "output": 8.0}})
    after_cycle(h, settings, report, Secrets([SECRET]), lines.append)
    [record] = cycle_records(h)
    assert record["cycle_id"] == report.cycle_id and record["cost"] == 6.0
    assert record["task_after"] == "use [REDACTED]" and SECRET.encode() not in stored_bytes(home)
    assert record["pending_approvals"] == 1 and record["oldest_pending_approval"]
    assert "files" not in record and lines == []


def test_without_prices_or_approvals_the_record_says_so(home):
    h = store_home(home)
    after_cycle(h, Settings(), _cycle(h, 0), Secrets(), [].append)
    [record] = cycle_records(h)
    assert record["cost"] is None and record["pending_approvals"] == 0 and record["oldest_pending_approval"] is None
    assert not any_rows(h, "approval")  # nothing parked


def test_retention_removes_old_cycles_files_but_never_their_records(home):
    h = store_home(home)
    reports, lines = [], []
    for minute in range(3):  # as cycles run: each one's files, then its aftercare
        reports.append(_cycle(h, minute))
        after_cycle(h, Settings(keep_cycles=1), reports[-1], Secrets(), lines.append)
    assert [r["cycle_id"] for r in cycle_records(h)] == [r.cycle_id for r in reports]
    assert sorted(p.name for p in h.scratchpad.iterdir()) == [
        f"{reports[-1].cycle_id}_after.yaml",
        f"{reports[-1].cycle_id}_before.yaml",
    ]
    assert lines == ["retention: removed 3 old snapshot/log file(s) and 0 transcript(s)"] * 2
    assert disk(h) == {"snapshots": [2, 6], "logs": [1, 11]}  # what retention left


def test_prune_false_keeps_every_file(home):
    h = store_home(home)
    for minute in range(2):
        after_cycle(h, Settings(keep_cycles=1), _cycle(h, minute), Secrets(), [].append, prune=False)
    assert len(list(h.scratchpad.glob("*_before.yaml"))) == 2


def test_the_metrics_file_and_the_hook_get_the_same_redacted_record(home, tmp_path):
    h = store_home(home)
    received = tmp_path / "hook.json"
    hook = [sys.executable, "-c", f"import sys; open({str(received)!r}, 'w').write(sys.stdin.read())"]
    settings = Settings(metrics_file="agent.prom", on_cycle_end=hook)
    report = _cycle(h, 0)
    lines: list[str] = []
    after_cycle(h, settings, report, Secrets([SECRET]), lines.append)
    sent = json.loads(received.read_text())
    health = sent.pop("health")  # the home's state as the cycle leaves it, beside the record
    assert sent == cycle_records(h)[0] and sent["task_after"] == "use [REDACTED]"
    assert health == {"state": "failing", "needs_person": True, "attention": [health["attention"][0]]}
    metrics = (home / "agent.prom").read_text()
    assert 'reason="error"} 1' in metrics and SECRET not in metrics
    assert len(lines) == 1 and lines[0].startswith("on_cycle_end: ") and "exited 0" in lines[0]


def test_a_record_that_cannot_be_written_is_a_disk_error_naming_the_database(home):
    """The record is the one write aftercare cannot do without (history, budgets): a failure is exit 7."""
    h = store_home(home)
    report = _cycle(h, 0)
    read_only(h)
    with pytest.raises(DiskError, match=r"could not write .*logs/agent.db: .*read-only"):
        after_cycle(h, Settings(), report, Secrets(), [].append)
