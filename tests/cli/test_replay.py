"""`agent replay CYCLE --model M` over real homes: a scratch copy, both outcomes, the home untouched."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import yaml

from tests.cli.helpers import ANSI, cycle_ids, done, echo, json_out, run_cycle
from tests.helpers import run_cli, tree_digest, write_active, write_script

STATE = {
    "goals": [],
    "current_task": "write the report",
    "pending_actions": ["next thing"],
    "completed_tasks": [],
    "notes": "",
    "last_updated": None,
}


def replay(home: Path, cycle_id: str, replies: list, *flags: str):
    script = write_script(home.parent, replies, name="replay_script.yaml")
    return run_cli("replay", cycle_id, "--home", str(home), "--model", f"scripted:{script}", *flags)


def recorded_home(home: Path) -> str:
    """A home whose one cycle wrote report.txt and finished its task."""
    write_active(home, STATE)
    write = {"tool": "write_file", "args": {"path": "report.txt", "content": "recorded"}}
    assert run_cycle(home, [write, done("wrote it")]).exit_code == 0
    (cycle_id,) = cycle_ids(home)
    return cycle_id


def test_replay_never_touches_the_home(home):
    cycle_id = recorded_home(home)
    hooked = home / "hooked"  # absolute paths: a replay that ran them would write into the home
    (home / "config.yaml").write_text(
        yaml.safe_dump(
            {
                "metrics_file": str(home / "agent.prom"),
                "on_cycle_end": [sys.executable, "-c", f"open({str(hooked)!r}, 'w')"],
            }
        )
    )
    digest = tree_digest(home)
    write = {"tool": "write_file", "args": {"path": "report.txt", "content": "replayed"}}
    result = replay(home, cycle_id, [write, echo("x"), done("other")])
    assert result.exit_code == 0, result.output
    assert tree_digest(home) == digest  # scratchpad/, logs/, the workspace: not a byte changed, no hook, no metrics
    assert (home / "workspace/report.txt").read_text() == "recorded"


def test_replay_starts_no_mcp_server_unless_asked(home):
    # an MCP server's tools act outside the scratch copy: this one leaves a mark the moment it starts
    cycle_id = recorded_home(home)
    mark = home.parent / "mcp-server-started"
    server = {"command": sys.executable, "args": ["-c", f"open({str(mark)!r}, 'w')"]}
    (home / "config.yaml").write_text(yaml.safe_dump({"mcp_servers": {"notes": server}}))

    result = replay(home, cycle_id, [done("quick")])
    assert result.exit_code == 0, result.output
    assert not mark.exists() and "MCP servers not started (notes)" in result.stderr

    result = replay(home, cycle_id, [done("quick")], "--with-mcp")
    assert result.exit_code == 0, result.output
    assert mark.exists() and "MCP servers not started" not in result.stderr


def test_replay_shows_both_outcomes_side_by_side(home):
    cycle_id = recorded_home(home)
    result = replay(home, cycle_id, [echo("a"), echo("a"), echo("a")])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert cycle_id in lines[0] and "scripted:" in lines[0]
    row = {line.split()[0]: line for line in lines[1:]}
    assert "done (exit 0)" in row["stop"] and "repeated_action (exit 3)" in row["stop"]
    assert "write_file, done" in row["actions"] and "echo, echo, echo" in row["actions"]
    assert "write the report -> next thing" in row["task"] and "(unchanged)" in row["task"]


def test_replay_json_carries_both_outcomes(home):
    cycle_id = recorded_home(home)
    data = json_out(replay(home, cycle_id, [done("quick")], "--json"))
    recorded, replayed = data["recorded"], data["replay"]
    assert data["cycle_id"] == cycle_id and data["scratch_home"] is None
    assert recorded["actions"] == ["write_file", "done"] and replayed["actions"] == ["done"]
    assert recorded["stop_reason"] == replayed["stop_reason"] == "done"
    assert replayed["change"]["task"] == {"before": "write the report", "after": "next thing", "changed": True}
    assert replayed["model"].startswith("scripted:") and replayed["iterations"] == 1


def test_the_replay_starts_from_the_before_snapshot_not_active_yaml(home):
    cycle_id = recorded_home(home)
    assert run_cli("task", "add", "edited since", "--first", "--home", str(home)).exit_code == 0
    data = json_out(replay(home, cycle_id, [done("again")], "--json"))
    assert data["replay"]["change"]["task"]["before"] == "write the report"


def test_replay_keep_leaves_the_scratch_home_whose_workspace_the_tools_used(home):
    cycle_id = recorded_home(home)
    write = {"tool": "write_file", "args": {"path": "report.txt", "content": "replayed"}}
    data = json_out(replay(home, cycle_id, [write, done("ok")], "--json", "--keep"))
    scratch = Path(data["scratch_home"])
    try:
        assert (scratch / "workspace/report.txt").read_text() == "replayed"
        assert (home / "workspace/report.txt").read_text() == "recorded"
    finally:
        shutil.rmtree(scratch)


def test_the_scratch_copy_holds_the_whole_workspace_even_folders_named_like_runtime_ones(home):
    cycle_id = recorded_home(home)
    (home / "workspace" / "data" / "logs").mkdir(parents=True)
    (home / "workspace" / "data" / "logs" / "app.log").write_text("kept")
    read = {"tool": "read_file", "args": {"path": "data/logs/app.log"}}
    data = json_out(replay(home, cycle_id, [read, done("read it")], "--json", "--keep"))
    scratch = Path(data["scratch_home"])
    try:
        assert "kept" in (scratch / "scratchpad" / "active.yaml").read_text()
        assert not (scratch / ".git").exists()
    finally:
        shutil.rmtree(scratch)


def test_replay_escapes_control_characters_the_model_wrote(home):
    cycle_id = recorded_home(home)
    result = replay(
        home, cycle_id, [{"tool": "update_scratchpad", "args": {"current_task": "evil \x1b[2J"}}, done("x")]
    )
    assert result.exit_code == 0 and ANSI not in result.stdout


def test_replay_of_an_unknown_or_pruned_cycle_exits_2_and_changes_nothing(home):
    cycle_id = recorded_home(home)
    digest = tree_digest(home)
    unknown = replay(home, "20990101_000000_01", [done("x")])
    assert unknown.exit_code == 2 and "20990101_000000_01" in unknown.stderr
    (home / "scratchpad" / f"{cycle_id}_before.yaml").unlink()
    pruned = replay(home, cycle_id, [done("x")])
    assert pruned.exit_code == 2 and "before snapshot" in pruned.stderr
    digest.pop(f"scratchpad/{cycle_id}_before.yaml")
    assert tree_digest(home) == digest


def test_replay_needs_a_model_and_a_usable_one(home):
    cycle_id = recorded_home(home)
    assert run_cli("replay", cycle_id, "--home", str(home)).exit_code == 2
    result = run_cli("replay", cycle_id, "--home", str(home), "--model", "nosuch:thing")
    assert result.exit_code == 2 and "nosuch" in result.stderr
