"""metrics_file: the last cycle in Prometheus text format, checked with prometheus_client's parser."""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import sqlite3
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent.after.metrics import counters as metric_counters
from agent.after.metrics import metrics_text
from agent.store.cycles import add_record
from agent.store.db import close_all
from tests.cli.helpers import done, echo, run_cycle
from tests.helpers import configure, cycle_records, run_cli, store_home, write_active

STATE = {
    "goals": [],
    "current_task": "one",
    "pending_actions": [],
    "completed_tasks": [],
    "notes": "",
    "last_updated": None,
}


def samples(text: str) -> dict[tuple, float]:
    """(metric name, frozen labels without home) -> value, from the real parser."""
    out = {}
    for family in text_string_to_metric_families(text):
        counter = family.name in ("agent_cycles", "agent_tokens", "agent_cost")  # the parser drops _total
        assert family.type == ("counter" if counter else "gauge")
        assert family.documentation
        for sample in family.samples:
            labels = dict(sample.labels)
            labels.pop("home")
            out[(sample.name, tuple(sorted(labels.items())))] = sample.value
    return out


def test_the_metrics_file_describes_the_last_cycle_and_parses(home):
    configure(home, STATE, metrics_file="agent.prom")
    result = run_cycle(home, [echo("hi"), done("ok")], "--json")
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    text = (home / "agent.prom").read_text()
    got = samples(text)
    assert got[("agent_last_cycle_exit_code", ())] == 0
    assert got[("agent_last_cycle_stop_reason", (("reason", "done"),))] == 1
    assert got[("agent_last_cycle_stop_reason", (("reason", "error"),))] == 0
    assert got[("agent_last_cycle_iterations", ())] == 2
    assert got[("agent_last_cycle_tokens", (("kind", "prompt"),))] == 0
    assert got[("agent_last_cycle_duration_seconds", ())] == report["duration_s"]
    assert got[("agent_consecutive_failures", ())] == 0 and got[("agent_consecutive_stalls", ())] == 0
    assert got[("agent_pending_approvals", ())] == 0
    started = _dt.datetime.fromisoformat(report["started"]).timestamp()
    assert started <= got[("agent_last_cycle_timestamp_seconds", ())] <= started + 60
    assert f'home="{home}"' in text
    assert (home / "agent.prom").stat().st_mode & 0o777 == 0o644  # node_exporter's user reads it
    assert not [p for p in home.iterdir() if p.name.endswith(".tmp")]


def test_consecutive_failures_count_the_newest_failed_cycles_and_reset_on_success(home):
    configure(home, STATE, metrics_file="agent.prom")
    run_cycle(home, [])  # no reply: fails
    run_cycle(home, [])
    assert samples((home / "agent.prom").read_text())[("agent_consecutive_failures", ())] == 2
    assert samples((home / "agent.prom").read_text())[("agent_last_cycle_exit_code", ())] == 4
    run_cycle(home, [done("ok")])
    assert samples((home / "agent.prom").read_text())[("agent_consecutive_failures", ())] == 0


def test_an_absolute_metrics_path_is_used_as_it_is(home, tmp_path):
    collector = tmp_path / "textfile"
    collector.mkdir()
    configure(home, STATE, metrics_file=str(collector / "agent.prom"))
    assert run_cycle(home, [done("ok")]).exit_code == 0
    assert samples((collector / "agent.prom").read_text())[("agent_last_cycle_exit_code", ())] == 0


def test_a_metrics_file_that_cannot_be_written_is_logged_and_the_cycle_keeps_its_exit_code(home):
    configure(home, STATE, metrics_file="no/such/folder/agent.prom")
    result = run_cycle(home, [done("ok")])
    assert result.exit_code == 0
    log = next((home / "logs").glob("cycle_*.log")).read_text()
    assert "metrics_file" in log and "not written" in log


def test_cost_stalls_and_pending_approvals_come_from_the_records():
    record = {
        "cycle_id": "x",
        "started": "2026-01-01T00:00:00+00:00",
        "duration_s": 2.5,
        "stop_reason": "stalled",
        "exit_code": 9,
        "iterations": 3,
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
        "cost": 0.0125,
        "pending_approvals": 2,
    }
    recent = [{"stop_reason": "error"}, {"stop_reason": "stalled"}, record]
    got = samples(metrics_text("/srv/agent", record, recent))
    assert got[("agent_last_cycle_cost", ())] == 0.0125
    assert got[("agent_consecutive_stalls", ())] == 2 and got[("agent_consecutive_failures", ())] == 0
    assert got[("agent_pending_approvals", ())] == 2
    assert got[("agent_last_cycle_timestamp_seconds", ())] == 1767225602.5
    held = {"stop_reason": "held", "held_for": "stalled"}
    got = samples(metrics_text("/srv/agent", held, [*recent, {"stop_reason": "idle"}, held, held]))
    assert got[("agent_consecutive_stalls", ())] == 4  # the held cycles after a stall are stalls too


@pytest.mark.parametrize("home_path", ['/srv/"quoted"\\agent', "/srv/new\nline"])
def test_label_values_are_escaped_so_the_file_still_parses(home_path):
    record = {"started": "bad", "stop_reason": "done", "exit_code": 0, "usage": None}
    families = list(text_string_to_metric_families(metrics_text(home_path, record, [record])))
    assert families[0].samples[0].labels["home"] == home_path


def test_a_record_without_cost_has_no_cost_series():
    record = {"started": "2026-01-01T00:00:00+00:00", "stop_reason": "done", "exit_code": 0}
    assert "agent_last_cycle_cost" not in metrics_text("/h", record, [record])


def test_a_parked_call_shows_as_a_pending_approval_with_the_time_it_was_parked(home):
    configure(home, metrics_file="agent.prom")
    (home / "config.yaml").write_text((home / "config.yaml").read_text() + "approval_required: [echo]\n")
    assert run_cycle(home, [{"tool": "echo", "args": {"message": "may I?"}}]).exit_code == 8
    got = samples((home / "agent.prom").read_text())
    assert got[("agent_pending_approvals", ())] == 1
    parked = got[("agent_oldest_pending_approval_timestamp_seconds", ())]
    assert abs(parked - time.time()) < 600
    assert run_cli("approve", "--home", str(home), "1").exit_code == 0
    assert run_cycle(home, [done("ok")]).exit_code == 0
    got = samples((home / "agent.prom").read_text())
    assert got[("agent_pending_approvals", ())] == 0
    assert ("agent_oldest_pending_approval_timestamp_seconds", ()) not in got  # none waits: no series


def test_the_sample_alert_rules_name_only_series_the_metrics_file_writes():
    """docs/operations.md's rules: every series they select (name and labels) is one the metrics
    file holds, one rule fires when the file is absent, and one when a budget is spent."""
    import re

    import yaml

    from tests.helpers import REPO

    doc = (REPO / "docs" / "operations.md").read_text()
    block = doc.split("Alert rules for Prometheus")[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    rules = [rule for group in yaml.safe_load(block)["groups"] for rule in group["rules"]]
    record = {
        "cycle_id": "20260101_000000",
        "started": "2026-01-01T00:00:00+00:00",
        "duration_s": 1.5,
        "model": "openai:m",
        "stop_reason": "budget_exhausted",
        "exit_code": 10,
        "iterations": 0,
        "usage": {"prompt_tokens": 1, "completion_tokens": 2, "cached_tokens": 0},
        "cost": 0.01,
        "pending_approvals": 1,
        "oldest_pending_approval": "2026-01-01T00:00:00+00:00",
    }
    from agent.after.health import cycle_facts, judge
    from agent.config import Settings

    health = judge(cycle_facts(record, Settings(schedule="0 2 * * *"), 0.0))  # with a schedule: its series too
    written = [
        (sample.name, dict(sample.labels))
        for family in text_string_to_metric_families(metrics_text("/srv/my-agent", record, [record], health=health))
        for sample in family.samples
    ]
    selectors = [
        (name, dict(re.findall(r'(\w+)="([^"]*)"', labels or "")))
        for rule in rules
        for name, labels in re.findall(r"(agent_[a-z_]+)(?:\{([^}]*)\})?", rule["expr"])
    ]
    assert len(selectors) >= len(rules)  # each rule selects a series of ours
    for name, labels in selectors:
        assert any(name == got and labels.items() <= got_labels.items() for got, got_labels in written), (name, labels)
    exprs = [rule["expr"] for rule in rules]
    assert any(e.startswith("absent(agent_") for e in exprs)
    assert any('reason="budget_exhausted"' in e for e in exprs)


def test_consecutive_failures_keep_counting_over_cycles_that_asked_no_model():
    failed = {"stop_reason": "error"}
    passed_over = [{"stop_reason": "idle"}, {"stop_reason": "budget_exhausted"}, {"stop_reason": "held"}]
    recent = [{"stop_reason": "done"}, failed, *passed_over, failed, {"stop_reason": "idle"}, failed]
    assert samples(metrics_text("/h", failed, recent))[("agent_consecutive_failures", ())] == 3
    recent.append({"stop_reason": "max_iterations"})  # a cycle that asked a model and got a reply: it ends
    assert samples(metrics_text("/h", recent[-1], recent))[("agent_consecutive_failures", ())] == 0


def counters(home) -> dict:
    got = samples((home / "agent.prom").read_text())
    return {
        "cycles": {dict(k[1])["reason"]: v for k, v in got.items() if k[0] == "agent_cycles_total"},
        "tokens": got[("agent_tokens_total", ())],
        "cost": got[("agent_cost_total", ())],
    }


def test_the_counters_count_every_cycle_by_stop_reason(home):
    configure(home, STATE, metrics_file="agent.prom", max_iterations=1)
    run_cycle(home, [done("ok")])
    run_cycle(home, [])  # fails
    run_cycle(home, [echo("x")])  # idle: run, so this one works on nothing and hits the cap
    got = counters(home)
    assert got["cycles"]["done"] == 1 and got["cycles"]["error"] == 1 and got["cycles"]["max_iterations"] == 1
    assert got["cycles"]["held"] == 0 and got["cycles"]["stalled"] == 0  # every reason has a series from the start
    assert got["tokens"] == 0 and got["cost"] == 0


def test_the_counters_never_go_backwards_after_a_prune_or_a_clean_reset(home):
    configure(home, STATE, metrics_file="agent.prom", keep_cycles=1)
    for _ in range(4):
        run_cycle(home, [echo("x"), done("ok")])
    assert counters(home)["cycles"]["done"] == 4
    assert run_cli("prune", "--home", str(home), "--keep", "1").exit_code == 0
    run_cycle(home, [done("ok")])
    assert counters(home)["cycles"]["done"] == 5  # retention and prune deleted files, not counts
    assert run_cli("reset", "--home", str(home), "--clean", "--yes").exit_code == 0
    assert cycle_records(home) == []  # every record forgotten
    write_active(home, STATE)
    run_cycle(home, [done("ok")])
    assert counters(home)["cycles"]["done"] == 6  # what the records counted stays


def test_the_counters_of_a_database_made_before_they_were_kept_count_the_records_already_in(home, monkeypatch):
    """A database made at migration 1 (the release before the counters): its next open adds `outcome`
    and counts every record in it once, so the counters carry on from what the records say."""
    from agent.store import migrations

    configure(home, STATE, metrics_file="agent.prom")
    monkeypatch.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:1])  # that release's schema
    for reply in ([done("ok")], [], [done("ok")]):
        run_cycle(home, reply)
    close_all()
    monkeypatch.undo()
    with contextlib.closing(sqlite3.connect(home / "logs" / "agent.db")) as older:
        assert older.execute("PRAGMA user_version").fetchone()[0] == 1
    write_active(home, dict(STATE, current_task="two"))
    run_cycle(home, [done("ok")])
    got = counters(home)
    assert got["cycles"]["done"] == 3 and got["cycles"]["error"] == 1


def test_the_counters_add_up_tokens_and_recorded_cost(tmp_path):
    home = store_home(tmp_path)
    for record in (
        {"cycle_id": "20261124_100000_01", "stop_reason": "done", "usage": {"total_tokens": 100}, "cost": 0.5},
        {"cycle_id": "20261124_100000_02", "stop_reason": "error", "usage": {"total_tokens": 20}, "cost": None},
        {"cycle_id": "20261124_100000_03", "stop_reason": "done", "usage": None, "cost": "bad"},
        {"cycle_id": "20261124_100000_04", "stop_reason": {"not": "a reason"}, "usage": "bad"},  # a hand edit
    ):
        add_record(home, record)
    got = samples(metrics_text("/h", {"stop_reason": "done"}, [], metric_counters(home)))
    assert got[("agent_tokens_total", ())] == 120 and got[("agent_cost_total", ())] == 0.5
    assert got[("agent_cycles_total", (("reason", "done"),))] == 2
    assert got[("agent_cycles_total", (("reason", "error"),))] == 1


def test_a_metrics_file_that_cannot_be_written_is_shown_by_status_until_it_works_again(home):
    configure(home, STATE, metrics_file="no/such/folder/agent.prom")
    for _ in range(2):
        assert run_cycle(home, [done("ok")]).exit_code == 0
    first = cycle_records(home)[0]["cycle_id"]
    out = run_cli("status", "--home", str(home)).stdout
    [line] = [line for line in out.splitlines() if line.startswith("metrics:")]
    assert f"metrics_file not written since cycle {first}:" in line and "no/such/folder/agent.prom" in line
    assert (
        json.loads(run_cli("status", "--home", str(home), "--json").stdout)["outlets"]["metrics_file"]["since"] == first
    )
    (home / "no" / "such" / "folder").mkdir(parents=True)
    assert run_cycle(home, [done("ok")]).exit_code == 0
    assert "metrics:" not in run_cli("status", "--home", str(home)).stdout
    assert json.loads(run_cli("status", "--home", str(home), "--json").stdout)["outlets"] == {}


def test_consecutive_stalls_is_the_streak_status_shows_once_the_task_has_stalled():
    held = {"stop_reason": "held", "held_for": "stalled", "task_id": "c1", "streak": 36}
    recent = [{"stop_reason": "stalled", "streak": 36}, held, held]
    assert samples(metrics_text("/h", held, recent, stall_cycles=5))[("agent_consecutive_stalls", ())] == 36
    counting = {"stop_reason": "max_iterations", "task_id": "c1", "streak": 4}
    assert samples(metrics_text("/h", counting, [counting], stall_cycles=5))[("agent_consecutive_stalls", ())] == 0


def test_the_metrics_and_the_hook_give_the_state_fleet_gives_after_a_cycle(tmp_path):
    """A cycle whose agent leaves a `tell` entry: the metrics file, the hook's record and fleet all
    say `surfaced`, needing a person (one computation: agent/after/health.py)."""
    import json
    import sys

    from tests.cli.helpers import done, run_cycle
    from tests.helpers import configure, run_cli

    home = tmp_path / "home"
    received = tmp_path / "hook.json"
    hook = [sys.executable, "-c", f"import sys; open({str(received)!r}, 'w').write(sys.stdin.read())"]
    tell = {"tell": {"kind": "list", "limit": 3, "surface": True, "description": "What a person should know."}}
    configure(home, {"current_task": "look"}, sections=tell, metrics_file="agent.prom", on_cycle_end=hook)
    update = {"tool": "update_scratchpad", "args": {"tell": "APPEND: the disk is nearly full"}}
    assert run_cycle(home, [update, done("looked")]).exit_code == 0
    metrics = (home / "agent.prom").read_text()
    [shown] = [line for line in metrics.splitlines() if line.startswith("agent_health_state{") and line.endswith(" 1")]
    hooked = json.loads(received.read_text())["health"]
    [row] = json.loads(run_cli("fleet", "--json", str(home)).output)
    assert 'state="surfaced"' in shown and hooked["state"] == row["state"] == "surfaced"
    assert f'agent_needs_person{{home="{home}"}} 1' in metrics and hooked["needs_person"] and row["needs_person"]
