"""Operator commands against real homes: diff, history, show, status, task/goal, prune, init,
doctor, and the run output on and off a terminal. Homes are made by running scripted cycles."""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from agent.config import Settings, field_docs, load_settings
from agent.outcomes import UsageError
from agent.scratchpad import Home, home_lock

from tests.helpers import read_yaml, run_cli, tree_digest, write_active, write_script

ANSI = "\x1b["


def echo(message: str) -> dict:
    return {"tool": "echo", "args": {"message": message}}


def done(summary: str) -> dict:
    return {"tool": "done", "args": {"summary": summary}}


def run_cycle(home: Path, replies: list, *extra: str):
    script = write_script(home.parent, replies, name=f"script_{len(list(home.parent.glob('script_*')))}.yaml")
    return run_cli("run", "--home", str(home), "--model", f"scripted:{script}", *extra)


def cycle_ids(home: Path) -> list[str]:
    return sorted(p.name[: -len("_before.yaml")] for p in (home / "scratchpad").glob("*_before.yaml"))


@pytest.fixture
def worked_home(home: Path) -> Path:
    """A home after two done cycles: task one -> two -> three."""
    write_active(home, {"goals": ["ship it"], "current_task": "one", "pending_actions": ["two", "three"],
                        "completed_tasks": [], "notes": "", "last_updated": None})
    assert run_cycle(home, [echo("hi"), done("did one")]).exit_code == 0
    assert run_cycle(home, [done("did two")]).exit_code == 0
    return home


def json_out(result):
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# ------------------------------------------------------------------------------------------ diff


def test_diff_defaults_to_the_latest_cycle_with_a_summary_then_a_plain_unified_diff(worked_home):
    result = run_cli("diff", "--home", str(worked_home))
    assert result.exit_code == 0
    out = result.stdout
    assert "task: two -> three" in out
    assert "completed: +1 (two: did two)" in out
    assert "pending: -1 (three); 1 -> 0 queued" in out
    assert "notes: +1 line(s)" in out
    latest = cycle_ids(worked_home)[-1]
    assert f"--- scratchpad/{latest}_before.yaml" in out and f"+++ scratchpad/{latest}_after.yaml" in out
    assert "+- task: two" in out
    assert ANSI not in out  # not a terminal: no colour codes


def test_diff_of_two_cycles_spans_from_the_first_before_to_the_second_after_as_json(worked_home):
    first, second = cycle_ids(worked_home)
    data = json_out(run_cli("diff", "--home", str(worked_home), first, second, "--json"))
    assert data["from"] == f"scratchpad/{first}_before.yaml" and data["to"] == f"scratchpad/{second}_after.yaml"
    summary = data["summary"]
    assert summary["task"] == {"before": "one", "after": "three", "changed": True}
    assert [t["task"] for t in summary["completed"]["added"]] == ["one", "two"]
    assert summary["pending"]["removed"] == ["two", "three"]
    assert summary["notes"]["lines_added"] == 3  # [TOOL], [COMPLETED], [COMPLETED]
    assert "+- task: one" in data["diff"]


def test_diff_a_cycle_against_active_shows_edits_made_since(worked_home):
    assert run_cli("task", "add", "four", "--home", str(worked_home)).exit_code == 0
    latest = cycle_ids(worked_home)[-1]
    data = json_out(run_cli("diff", "--home", str(worked_home), f"{latest}:after", "active", "--json"))
    assert data["to"] == "scratchpad/active.yaml"
    assert data["summary"]["pending"]["added"] == ["four"]
    assert data["summary"]["task"]["changed"] is False


def test_diff_active_alone_compares_the_latest_after_with_active(worked_home):
    assert run_cli("goal", "add", "be kind", "--home", str(worked_home)).exit_code == 0
    result = run_cli("diff", "active", "--home", str(worked_home))
    assert result.exit_code == 0
    assert "goals: +1, -0" in result.stdout
    assert "+- be kind" in result.stdout


def test_diff_colours_only_when_asked_or_on_a_terminal(worked_home):
    plain = run_cli("diff", "--home", str(worked_home)).stdout
    coloured = run_cli("diff", "--home", str(worked_home), "--color").stdout
    assert ANSI not in plain
    assert "\x1b[32m+" in coloured and "\x1b[31m-" in coloured


def test_diff_of_a_cycle_that_does_not_exist_is_a_clear_usage_error(worked_home):
    before = tree_digest(worked_home)
    result = run_cli("diff", "--home", str(worked_home), "20990101_000000")
    assert result.exit_code == 2
    assert "no cycle '20990101_000000'" in result.stderr and "agent history" in result.stderr
    bad_label = run_cli("diff", "--home", str(worked_home), f"{cycle_ids(worked_home)[0]}:middle")
    assert bad_label.exit_code == 2 and "before or after" in bad_label.stderr
    assert tree_digest(worked_home) == before


def test_diff_in_a_home_with_no_cycles_says_so(home):
    result = run_cli("diff", "--home", str(home))
    assert result.exit_code == 2 and "no cycles" in result.stderr


def test_diff_of_a_pruned_cycle_says_its_snapshot_is_gone(worked_home):
    first = cycle_ids(worked_home)[0]
    assert run_cli("prune", "--keep", "1", "--home", str(worked_home)).exit_code == 0
    result = run_cli("diff", first, "--home", str(worked_home))
    assert result.exit_code == 2 and "pruned" in result.stderr


def test_summarize_change_counts_repeats_and_reorders():
    from agent.operator_cli import summarize_change

    old = {"current_task": "a", "pending_actions": ["x", "y", "x"], "completed_tasks": ["a0"], "goals": [],
           "notes": "l1\nl2", "last_updated": None}
    new = dict(old, pending_actions=["y", "x", "x"], notes="l1\nl2b\nl3")
    summary = summarize_change(old, new)
    assert summary["pending"] == {"added": [], "removed": [], "reordered": True, "before": 3, "after": 3}
    assert summary["notes"] == {"lines_added": 2, "lines_removed": 1}
    assert summary["task"]["changed"] is False


# --------------------------------------------------------------------------------------- history


def test_history_lists_one_row_per_cycle_newest_first(home):
    write_active(home, {"current_task": "one", "pending_actions": ["two"]})
    assert run_cycle(home, [done("did one")]).exit_code == 0
    assert run_cycle(home, [echo("a"), echo("b")], "--max-iterations", "2").exit_code == 3
    assert run_cycle(home, []).exit_code == 4  # the script is empty: a model error
    rows = json_out(run_cli("history", "--home", str(home), "--json"))
    assert [r["stop_reason"] for r in rows] == ["error", "max_iterations", "done"]
    assert [r["iterations"] for r in rows] == [1, 2, 1]
    assert rows[-1]["task_before"] == "one" and rows[-1]["task_after"] == "two"
    assert all(r["source"] == "index" for r in rows)
    table = run_cli("history", "--home", str(home)).stdout.splitlines()
    assert table[0].split() == ["CYCLE", "STARTED", "(UTC)", "TOOK", "ITER", "STOP", "TOKENS", "TASK"]
    assert len(table) == 4 and "one -> two" in table[3] and "max_iterations" in table[2]


def test_history_limit_keeps_the_newest(worked_home):
    rows = json_out(run_cli("history", "--home", str(worked_home), "--json", "--limit", "1"))
    assert [r["cycle_id"] for r in rows] == [cycle_ids(worked_home)[-1]]


def test_history_without_the_index_is_rebuilt_from_logs_and_snapshots(home):
    write_active(home, {"current_task": "one", "pending_actions": ["two"]})
    assert run_cycle(home, [echo("a"), done("did one")]).exit_code == 0
    assert run_cycle(home, [echo("b"), echo("c")], "--max-iterations", "2").exit_code == 3
    indexed = json_out(run_cli("history", "--home", str(home), "--json"))
    (home / "logs" / "index.jsonl").unlink()
    rebuilt = json_out(run_cli("history", "--home", str(home), "--json"))
    for old, new in zip(indexed, rebuilt):
        assert new["source"] == "snapshots"
        for key in ("cycle_id", "stop_reason", "iterations", "exit_code", "task_before", "task_after", "model"):
            assert new[key] == old[key], key
    for log in (home / "logs").glob("cycle_*.log"):
        log.unlink()
    from_snapshots = json_out(run_cli("history", "--home", str(home), "--json"))
    assert [(r["stop_reason"], r["iterations"]) for r in from_snapshots] == [("max_iterations", 2), ("done", 2)]


def test_history_of_an_empty_home(home):
    assert "no cycles" in run_cli("history", "--home", str(home)).stdout
    assert json_out(run_cli("history", "--home", str(home), "--json")) == []


def test_history_of_a_missing_home_is_a_usage_error(tmp_path):
    result = run_cli("history", "--home", str(tmp_path / "nowhere"))
    assert result.exit_code == 2 and "does not exist" in result.stderr


# ------------------------------------------------------------------------------------ show/status


def test_show_pretty_prints_the_state(worked_home):
    out = run_cli("show", "--home", str(worked_home)).stdout
    assert "current task: three" in out
    assert "goals (1):\n  1. ship it" in out
    assert "completed (2):\n  - one: did one\n  - two: did two" in out
    assert "[COMPLETED] did two" in out and "last updated: 20" in out
    assert ANSI not in out
    data = json_out(run_cli("show", "--home", str(worked_home), "--json"))
    assert data["state"]["current_task"] == "three" and "archived_completed_tasks" not in data


def test_show_all_adds_the_archive_and_tolerates_its_absence(worked_home):
    assert "archived completed (0" in run_cli("show", "--all", "--home", str(worked_home)).stdout
    archive = worked_home / "logs" / "archive.jsonl"
    archive.write_text(
        json.dumps({"cycle_id": "20200101_000000", "kind": "completed_task",
                    "value": {"task": "old", "summary": "long ago"}, "archived_at": "2020-01-01T00:00:00+00:00"})
        + "\n" + json.dumps({"cycle_id": "20200101_000000", "kind": "note", "value": "an old note",
                             "archived_at": "2020-01-01T00:00:00+00:00"})
        + "\n{torn line")
    out = run_cli("show", "--all", "--home", str(worked_home)).stdout
    assert "old: long ago  [cycle 20200101_000000]" in out and "an old note" in out
    data = json_out(run_cli("show", "--all", "--json", "--home", str(worked_home)))
    assert [r["value"]["task"] for r in data["archived_completed_tasks"]] == ["old"]


def test_show_refuses_an_invalid_scratchpad(home):
    write_active(home, "goals: [unclosed")
    result = run_cli("show", "--home", str(home))
    assert result.exit_code == 6 and "active.yaml" in result.stderr


def test_status_reports_last_cycle_disk_use_and_model(worked_home):
    (worked_home / "config.yaml").write_text("model: openai:gpt-4o-mini\n")
    data = json_out(run_cli("status", "--home", str(worked_home), "--json"))
    assert data["running"] is False
    assert data["last_cycle"]["stop_reason"] == "done" and data["last_cycle"]["task_after"] == "three"
    assert 0 <= data["last_cycle"]["age_s"] < 600
    assert data["snapshots"]["files"] == 4 and data["snapshots"]["bytes"] > 0
    assert data["logs"]["files"] == 2
    assert data["model"] == "openai:gpt-4o-mini" and data["cycles"] == 2
    out = run_cli("status", "--home", str(worked_home)).stdout
    assert "running:   no" in out and "snapshots: 4 file(s)" in out and "done (exit 0)" in out


def test_status_sees_a_running_cycle_and_a_broken_config(worked_home):
    (worked_home / "config.yaml").write_text("modle: x\n")
    with home_lock(Home.at(worked_home)):
        data = json_out(run_cli("status", "--home", str(worked_home), "--json"))
    assert data["running"] is True
    assert "unknown key 'modle'" in data["config_error"]


# ---------------------------------------------------------------------------------- task / goal


def test_task_add_list_and_drop(home):
    assert "current task is now: first" in run_cli("task", "add", "first", "--home", str(home)).stdout
    run_cli("task", "add", "second", "--home", str(home))
    assert "queued first" in run_cli("task", "add", "urgent", "--first", "--home", str(home)).stdout
    state = read_yaml(home / "scratchpad" / "active.yaml")
    assert state["current_task"] == "first" and state["pending_actions"] == ["urgent", "second"]
    listing = run_cli("task", "list", "--home", str(home)).stdout
    assert listing.splitlines() == ["current: first", "      1. urgent", "      2. second"]
    assert "dropped pending task 1: urgent" in run_cli("task", "drop", "1", "--home", str(home)).stdout
    data = json_out(run_cli("task", "drop", "0", "--home", str(home), "--json"))
    assert data["current_task"] == "second" and data["pending_actions"] == []
    assert json_out(run_cli("task", "list", "--json", "--home", str(home))) == {
        "current_task": "second", "pending_actions": []}


def test_task_edits_keep_everything_else_and_leave_no_temporaries(worked_home):
    active = worked_home / "scratchpad" / "active.yaml"
    state = read_yaml(active)
    state["operator_field"] = {"kept": True}
    active.write_text(yaml.safe_dump(state))
    assert run_cli("task", "add", "four", "--home", str(worked_home)).exit_code == 0
    after = read_yaml(active)
    assert after["pending_actions"] == ["four"]
    assert {k: v for k, v in after.items() if k != "pending_actions"} == \
        {k: v for k, v in state.items() if k != "pending_actions"}
    assert not list((worked_home / "scratchpad").glob(".*.tmp"))


@pytest.mark.parametrize("args, message", [
    (["task", "drop", "3"], "there is no pending task 3: they are numbered 1 to 2"),
    (["task", "add", "   "], "task text is empty"),
    (["goal", "drop", "1"], "the goal list is empty"),
])
def test_task_bad_input_is_refused_and_nothing_changes(home, args, message):
    write_active(home, {"current_task": "a", "pending_actions": ["b", "c"]})
    before = tree_digest(home)
    result = run_cli(*args, "--home", str(home))
    assert result.exit_code == 2 and message in result.stderr
    assert tree_digest(home) == before


def test_task_edit_is_busy_while_a_cycle_holds_the_lock(home):
    write_active(home, {"current_task": "a"})
    before = tree_digest(home)
    with home_lock(Home.at(home)):
        result = run_cli("task", "add", "b", "--home", str(home))
        waited = run_cli("goal", "add", "g", "--wait", "0.1", "--home", str(home))
    assert result.exit_code == 5 and "lock" in result.stderr
    assert waited.exit_code == 5 and "after waiting 0.1s" in waited.stderr
    assert tree_digest(home) == before


def test_task_edit_of_an_invalid_scratchpad_exits_6_untouched(home):
    write_active(home, "current_task: [not, a, string]\n")
    before = tree_digest(home)
    result = run_cli("task", "add", "x", "--home", str(home))
    assert result.exit_code == 6 and "current_task" in result.stderr
    assert tree_digest(home) == before


def test_goal_add_list_drop(home):
    run_cli("goal", "add", "learn", "--home", str(home))
    run_cli("goal", "add", "teach", "--home", str(home))
    assert run_cli("goal", "list", "--home", str(home)).stdout.splitlines() == ["  1. learn", "  2. teach"]
    run_cli("goal", "drop", "1", "--home", str(home))
    assert json_out(run_cli("goal", "list", "--json", "--home", str(home))) == {"goals": ["teach"]}


def test_a_cycle_picks_up_a_task_added_from_the_cli(home):
    run_cli("task", "add", "say hi", "--home", str(home))
    assert run_cycle(home, [echo("hi"), done("said hi")]).exit_code == 0
    assert read_yaml(home / "scratchpad" / "active.yaml")["completed_tasks"] == [
        {"task": "say hi", "summary": "said hi"}]


# ----------------------------------------------------------------------------------------- prune


def age_cycle(home: Path, cycle_id: str, old_id: str) -> None:
    """Rename a real cycle's files to an older id (as if it had run then)."""
    for label in ("before", "after"):
        (home / "scratchpad" / f"{cycle_id}_{label}.yaml").rename(home / "scratchpad" / f"{old_id}_{label}.yaml")
    (home / "logs" / f"cycle_{cycle_id}.log").rename(home / "logs" / f"cycle_{old_id}.log")


@pytest.fixture
def four_cycles(home: Path) -> Path:
    for _ in range(4):
        assert run_cycle(home, [done("ok")]).exit_code == 0
    return home


def test_prune_dry_run_lists_and_removes_nothing(four_cycles):
    before = tree_digest(four_cycles)
    result = run_cli("prune", "--keep", "1", "--dry-run", "--home", str(four_cycles))
    assert result.exit_code == 0
    assert result.stdout.count("would remove scratchpad/") == 6 and "would remove 3 cycle(s), 9 file(s)" in result.stdout
    assert tree_digest(four_cycles) == before


def test_prune_keep_removes_old_pairs_and_logs_but_never_active_index_or_archive(four_cycles):
    (four_cycles / "logs" / "archive.jsonl").write_text('{"kind": "note", "value": "x"}\n')
    keep = {p: four_cycles / p for p in ("scratchpad/active.yaml", "logs/index.jsonl", "logs/archive.jsonl")}
    digests = {p: tree_digest(four_cycles)[p] for p in keep}
    ids = cycle_ids(four_cycles)
    data = json_out(run_cli("prune", "--keep", "2", "--json", "--home", str(four_cycles)))
    assert data["removed_cycles"] == ids[:2] and data["kept_cycles"] == 2 and len(data["deleted"]) == 6
    assert cycle_ids(four_cycles) == ids[2:]
    assert sorted(p.name for p in (four_cycles / "logs").glob("cycle_*.log")) == [f"cycle_{i}.log" for i in ids[2:]]
    assert {p: tree_digest(four_cycles)[p] for p in keep} == digests
    history = json_out(run_cli("history", "--json", "--home", str(four_cycles)))
    assert len(history) == 4  # the index still remembers pruned cycles


def test_prune_older_than_keeps_the_newest_n_when_both_are_given(four_cycles):
    ids = cycle_ids(four_cycles)
    age_cycle(four_cycles, ids[0], "20200101_000000")
    age_cycle(four_cycles, ids[1], "20200102_000000")
    only_age = json_out(run_cli("prune", "--older-than", "7d", "--dry-run", "--json", "--home", str(four_cycles)))
    assert only_age["removed_cycles"] == ["20200101_000000", "20200102_000000"]
    both = json_out(run_cli("prune", "--older-than", "7d", "--keep", "3", "--json", "--home", str(four_cycles)))
    assert both["removed_cycles"] == ["20200101_000000"]
    assert cycle_ids(four_cycles) == ["20200102_000000", *ids[2:]]


@pytest.mark.parametrize("args, message", [
    ([], "--keep N and/or --older-than"),
    (["--older-than", "7 days"], "is not a number followed by a unit"),
    (["--keep", "-1"], "-1"),
])
def test_prune_bad_input_is_a_usage_error_and_removes_nothing(four_cycles, args, message):
    before = tree_digest(four_cycles)
    result = run_cli("prune", *args, "--home", str(four_cycles))
    assert result.exit_code == 2 and message in result.stderr
    assert tree_digest(four_cycles) == before


def test_prune_is_busy_while_a_cycle_runs(four_cycles):
    before = tree_digest(four_cycles)
    with home_lock(Home.at(four_cycles)):
        result = run_cli("prune", "--keep", "1", "--home", str(four_cycles))
    assert result.exit_code == 5 and tree_digest(four_cycles) == before


def test_retention_settings_are_checked(home):
    (home / "config.yaml").write_text("keep_cycles: 5\nkeep_days: 1.5\n")
    settings = load_settings(home)
    assert (settings.keep_cycles, settings.keep_days) == (5, 1.5)
    (home / "config.yaml").write_text("keep_cycles: 0\n")
    with pytest.raises(UsageError, match="keep_cycles"):
        load_settings(home)


# ------------------------------------------------------------------------------------------ init


def test_init_creates_a_home_with_a_commented_config_that_loads(tmp_path):
    target = tmp_path / "new" / "home"
    data = json_out(run_cli("init", str(target), "--json"))
    assert data["created"] == ["rules.md", "config.yaml", "scratchpad/active.yaml"] and data["kept"] == []
    config = (target / "config.yaml").read_text()
    assert all(line.startswith("#") or not line.strip() for line in config.splitlines())
    assert load_settings(target) == Settings()
    for name, doc, _ in field_docs():
        assert f"# {doc}" in config and f"# {name}:" in config
    # Uncommenting every setting gives a valid config equal to the defaults.
    uncommented = "\n".join(line[2:] for line in config.splitlines()
                            if line.startswith("# ") and ":" in line.split()[1] and line[2:3].islower()
                            and line[2:].split(":")[0] in {n for n, _, _ in field_docs()})
    (target / "config.yaml").write_text(uncommented)
    assert load_settings(target) == Settings()
    assert read_yaml(target / "scratchpad" / "active.yaml")["pending_actions"] == []
    for folder in ("scratchpad", "logs"):
        assert (target / folder).stat().st_mode & 0o777 == 0o700


def test_init_keeps_existing_files_and_the_new_home_runs(home):
    (home / "rules.md").write_text("my rules\n")
    data = json_out(run_cli("init", str(home), "--json"))
    assert data["kept"] == ["rules.md"] and (home / "rules.md").read_text() == "my rules\n"
    assert run_cycle(home, [done("ok")]).exit_code == 0
    assert run_cli("init", str(home)).stdout.startswith(f"home ready at {home}: created nothing; kept existing")


def test_init_with_a_bad_template_creates_nothing(tmp_path):
    result = run_cli("init", str(tmp_path / "h"), "--template", "nope")
    assert result.exit_code == 2 and "no template named 'nope'" in result.stderr
    assert not (tmp_path / "h").exists()


# ---------------------------------------------------------------------------------------- doctor


class ModelsHandler(BaseHTTPRequestHandler):
    models = ["tiny-model", "other"]
    key = "sk-test-secret-value-123"

    def do_GET(self):  # noqa: N802
        if self.headers.get("Authorization") != f"Bearer {self.key}":
            self.send_response(401)
            self.end_headers()
            return
        if self.path != "/v1/models":
            self.send_response(404)
            self.end_headers()
            return
        body = json.dumps({"object": "list", "data": [{"id": m, "object": "model"} for m in self.models]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def models_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), ModelsHandler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def doctor(home: Path, *args: str, env: dict | None = None):
    return run_cli("doctor", "--home", str(home), *args, env=env)


def checks_of(result) -> dict:
    return {c["check"]: c for c in json.loads(result.stdout)}


@pytest.fixture
def healthy_home(tmp_path: Path) -> Path:
    """A home made by `agent init` (private folders), configured for a scripted model, one cycle run."""
    root = tmp_path / "healthy"
    run_cli("init", str(root))
    script = write_script(tmp_path, [done("x")], name="doctor_script.yaml")
    (root / "config.yaml").write_text(f"model: scripted:{script}\n")
    assert run_cli("run", "--home", str(root)).exit_code == 0
    return root


def test_doctor_passes_a_healthy_scripted_home(healthy_home):
    result = doctor(healthy_home)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert [line.split()[1] for line in lines] == ["home", "config", "scratchpad", "model", "lock", "scratchpad/",
                                                   "logs/"]
    assert all(line.startswith("ok ") for line in lines)


def test_doctor_checks_an_openai_endpoint_and_never_prints_the_key(home, models_server):
    run_cli("init", str(home))
    key = ModelsHandler.key
    (home / "config.yaml").write_text(f"model: openai:tiny-model\nbase_url: {models_server}\n")
    result = doctor(home, env={"OPENAI_API_KEY": key})
    assert result.exit_code == 0, result.output
    assert "OPENAI_API_KEY is set" in result.stdout and "serves tiny-model" in result.stdout
    assert key not in result.output
    (home / "config.yaml").write_text(f"model: openai:missing-model\nbase_url: {models_server}\n")
    missing = doctor(home, "--json", env={"OPENAI_API_KEY": key})
    assert missing.exit_code == 1
    endpoint = checks_of(missing)["endpoint"]
    assert not endpoint["ok"] and "tiny-model, other" in endpoint["detail"] and endpoint["fix"]
    wrong_key = doctor(home, "--json", env={"OPENAI_API_KEY": "sk-wrong-key-0000"})
    assert wrong_key.exit_code == 1 and "refused the key (HTTP 401)" in checks_of(wrong_key)["endpoint"]["detail"]
    assert "sk-wrong-key-0000" not in wrong_key.output


def test_doctor_reports_a_missing_key_and_an_unreachable_endpoint(home):
    run_cli("init", str(home))
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    (home / "config.yaml").write_text(f"model: openai:m\nbase_url: http://127.0.0.1:{port}/v1\n")
    no_key = doctor(home)
    assert no_key.exit_code == 1
    assert "FAIL key" in no_key.stdout and "-> fix: export OPENAI_API_KEY=" in no_key.stdout
    down = doctor(home, env={"OPENAI_API_KEY": "whatever-key"})
    assert down.exit_code == 1 and "cannot reach" in down.stdout and "start the server" in down.stdout


def test_doctor_loads_the_embedded_model(home):
    pytest.importorskip("llama_cpp")
    from agent.models import bundled_model_path

    if bundled_model_path() is None:
        pytest.skip("the bundled model is not installed")
    run_cli("init", str(home))
    (home / "config.yaml").write_text("model: local\n")
    result = doctor(home, "--json")
    assert result.exit_code == 0, result.output
    assert "loads" in checks_of(result)["model"]["detail"]


def test_doctor_flags_bad_config_scratchpad_and_permissions(home):
    run_cli("init", str(home))
    (home / "config.yaml").write_text("temperature: hot\n")
    write_active(home, "goals: {not: a list}\n")
    os.chmod(home / "logs", 0o755)
    result = doctor(home, "--json")
    assert result.exit_code == 1
    checks = checks_of(result)
    assert not checks["config"]["ok"] and "temperature" in checks["config"]["detail"]
    assert not checks["scratchpad"]["ok"] and "agent reset" in checks["scratchpad"]["fix"]
    assert not checks["logs/"]["ok"] and checks["logs/"]["fix"] == f"chmod 700 {home / 'logs'}"
    assert checks["scratchpad/"]["ok"] and checks["lock"]["ok"]


def test_doctor_reports_a_held_lock_without_failing(healthy_home):
    with home_lock(Home.at(healthy_home)):
        result = doctor(healthy_home)
    assert result.exit_code == 0 and "a cycle is running now" in result.stdout


def test_doctor_on_a_missing_home(tmp_path):
    result = doctor(tmp_path / "nope")
    assert result.exit_code == 1 and "FAIL home" in result.stdout and "agent init" in result.stdout


# ------------------------------------------------------------------------------------ run output


def test_run_off_a_terminal_prints_plain_lines(home):
    result = run_cycle(home, [echo("hello"), done("said it")])
    lines = result.stdout.splitlines()
    assert lines[0].startswith("cycle ") and "[TOOL] echo" in lines[1] and "[COMPLETED] said it" in lines[2]
    assert lines[3].startswith("cycle ") and " done after 2 iteration(s)" in lines[3]
    assert ANSI not in result.output and "\r" not in result.output


def test_run_quiet_prints_nothing_but_a_failure(home):
    ok = run_cycle(home, [done("x")], "--quiet")
    assert ok.exit_code == 0 and ok.output == ""
    failed = run_cycle(home, [], "--quiet")
    assert failed.exit_code == 4 and failed.stdout == ""
    assert "failed: ScriptEnded" in failed.stderr and "logs/cycle_" in failed.stderr


def test_live_reporter_draws_iterations_tools_and_tokens():
    from rich.console import Console

    from agent.cycle import CycleReport
    from agent.dispatcher import Kind, Outcome
    from agent.models import Usage
    from agent.ui import LiveReporter

    buffer = io.StringIO()
    reporter = LiveReporter(Console(file=buffer, force_terminal=True, width=120))
    reporter("start", cycle_id="20260101_000000", model="openai:m", task="count [sheep]")
    reporter("iteration", n=1, max=5, outcome=Outcome(Kind.TOOL, "[TOOL] echo({'message': 'hi'}) -> hi", "echo"),
             usage=Usage(prompt_tokens=1200, completion_tokens=34))
    reporter("something_new", detail="ignored")
    report = CycleReport("20260101_000000", "2026-01-01T00:00:00+00:00", "openai:m", stop_reason="done",
                         exit_code=0, iterations=1, task_before="count [sheep]", task_after=None,
                         usage=Usage(prompt_tokens=1200, completion_tokens=34))
    reporter("end", report=report)
    out = buffer.getvalue()
    assert ANSI in out
    assert "[TOOL] echo({'message': 'hi'}) -> hi" in out  # rich markup in notes is printed, not parsed
    assert "1/5" in out and "1,234 tokens" in out and "count [sheep]" in out
    assert "done" in out and "(exit 0)" in out
    assert reporter.live is None


def test_live_reporter_follows_a_real_cycle(home):
    from rich.console import Console

    from agent.cycle import Cycle
    from agent.models import ScriptedModel
    from agent.ui import LiveReporter

    buffer = io.StringIO()
    reporter = LiveReporter(Console(file=buffer, force_terminal=True, width=120))
    script = write_script(home.parent, [echo("hi"), {"tool": "nope", "args": {}}, done("ok")])
    report = Cycle(Home.at(home), Settings(), ScriptedModel(script), reporter).run()
    out = buffer.getvalue()
    assert report.exit_code == 0
    for text in (report.cycle_id, "[TOOL] echo", "[UNKNOWN TOOL]", "[COMPLETED] ok", "after 3 iteration(s)"):
        assert text in out


def test_run_on_a_terminal_shows_live_progress(home, tmp_path):
    script = write_script(tmp_path, [echo("hi"), done("ok")], name="tty.yaml")
    main_fd, child_fd = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ("AGENT_HOME", "AGENT_MODEL", "OPENAI_API_KEY")}
    env.update(TERM="xterm", COLUMNS="120")
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "agent", "run", "--home", str(home), "--model", f"scripted:{script}"],
                            stdin=child_fd, stdout=child_fd, stderr=child_fd, env=env, close_fds=True)
    os.close(child_fd)
    chunks = []
    while True:
        try:
            chunk = os.read(main_fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(main_fd)
    assert proc.wait(timeout=60) == 0
    out = b"".join(chunks).decode("utf-8", errors="replace")
    assert ANSI in out and "[TOOL] echo" in out and "[COMPLETED] ok" in out
    assert "\x1b[?25h" in out  # the cursor is shown again when the live display stops


def test_operator_commands_have_help_and_json():
    from agent.cli import main

    for name in ("diff", "history", "show", "status", "prune", "doctor"):
        command = main.commands[name]
        assert command.help and any(p.name == "as_json" for p in command.params), name
    for group, subs in (("task", ("add", "list", "drop")), ("goal", ("add", "list", "drop"))):
        for sub in subs:
            command = main.commands[group].commands[sub]
            assert command.help and any(p.name == "as_json" for p in command.params), (group, sub)


def test_odd_index_records_do_not_crash_history_or_status(tmp_path):
    from tests.helpers import run_cli as run_cli_, write_script as write_script_

    home = tmp_path / "h"
    home.mkdir()
    script = write_script_(tmp_path, [{"tool": "done", "args": {"summary": "ok"}}])
    assert run_cli_("run", "--home", str(home), "--model", f"scripted:{script}").exit_code == 0
    with open(home / "logs" / "index.jsonl", "a") as index:
        index.write('{"cycle_id": 5}\n')
        index.write('{"cycle_id": "20991231_000000", "started": "2099-12-31T00:00:00", "duration_s": "x"}\n')
    assert run_cli_("history", "--home", str(home)).exit_code == 0
    assert run_cli_("status", "--home", str(home)).exit_code == 0


def test_diff_tells_archived_completed_tasks_from_hand_edits():
    from agent.operator_cli import summarize_change, summary_lines

    old = {"completed_tasks": ["a", "b", "c"], "current_task": None}
    archived = summarize_change(old, {"completed_tasks": ["b", "c", "d"], "current_task": None})
    assert "-1 oldest moved to logs/archive.jsonl" in summary_lines(archived)[1]
    edited = summarize_change(old, {"completed_tasks": ["a", "c"], "current_task": None})
    assert "edited by hand?" in summary_lines(edited)[1]
