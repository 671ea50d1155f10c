"""Approvals: gated calls are parked (exit 8), the operator approves or denies them, and the next
cycle runs the approved ones first, exactly as parked, and tells the model about denials."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.common.outcomes import Parked, StopReason
from agent.common.tags import Outcome, Tag
from agent.config import Settings
from agent.cycle.dispatch import dispatch
from agent.gates.approvals import ApprovalGate, gate, read_approvals
from agent.gates.base import Action
from agent.state import fresh_state
from agent.store.db import any_rows, close_all, records
from agent.store.home import Home
from agent.store.lock import home_lock
from agent.tools import NeedsApproval, ToolContext, build_registry
from tests.cli.helpers import done, echo, run_cycle
from tests.gates.helpers import made
from tests.helpers import read_yaml, run_agent_process, run_cli, stored_bytes, tree_digest, write_active, write_script

WRITE = {"tool": "write_file", "args": {"path": "report.txt", "content": "hello"}}


@pytest.fixture
def gated_home(home: Path) -> Path:
    (home / "config.yaml").write_text("approval_required: [write_file]\nworkspace: workspace\n")
    (home / "workspace").mkdir()
    write_active(home, {"current_task": "write the report", "pending_actions": ["then rest"]})
    return home


def approvals_json(home: Path) -> list[dict]:
    result = run_cli("approvals", "--home", str(home), "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def break_approvals(home: Path) -> None:
    """A parked call that is not an approval record: a row edited by hand (sqlite3) or by a bug."""
    db = records(Home.at(home))
    with db.write():
        db.execute("INSERT INTO approval (id, format, status, record) VALUES (9, 1, 'pending', '{not json')")


def notes(home: Path) -> list[str]:
    return read_yaml(home / "scratchpad" / "active.yaml")["notes"].splitlines()


def test_a_gated_call_is_parked_not_run_and_the_cycle_exits_8(gated_home):
    result = run_cycle(gated_home, [echo("first"), WRITE, done("never reached")], "--json")
    assert result.exit_code == 8
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["stop_reason"] == "awaiting_approval"
    assert not (gated_home / "workspace" / "report.txt").exists()
    assert any(line.startswith("[TOOL] echo") for line in notes(gated_home))  # the work so far is kept
    assert any(line.startswith("[APPROVAL] call 1 parked") for line in notes(gated_home))
    [record] = approvals_json(gated_home)
    assert {k: record[k] for k in ("id", "cycle_id", "tool", "args", "status")} == {
        "id": "1",
        "cycle_id": report["cycle_id"],
        "tool": "write_file",
        "args": WRITE["args"],
        "status": "pending",
    }


def test_an_approved_call_runs_first_next_cycle_with_the_args_it_was_parked_with(gated_home):
    assert run_cycle(gated_home, [WRITE]).exit_code == 8
    result = run_cli("approve", "--home", str(gated_home), "1")
    assert result.exit_code == 0 and "approved" in result.stdout
    # the model now asks for other content: the approved call still writes what was parked
    assert (
        run_cycle(gated_home, [{"tool": "read_file", "args": {"path": "report.txt"}}, done("written")]).exit_code == 0
    )
    assert (gated_home / "workspace" / "report.txt").read_text() == "hello"
    lines = notes(gated_home)
    approved = next(i for i, line in enumerate(lines) if "call 1 approved" in line)
    assert lines[approved + 1].startswith("[TOOL] write_file(")
    assert lines[approved + 2].startswith("[TOOL] read_file(") and lines[approved + 2].endswith("-> hello")
    [record] = approvals_json(gated_home)
    assert record["status"] == "ran" and record["result"].startswith("[TOOL] write_file(")


def test_a_denied_call_never_runs_and_the_model_reads_the_reason(gated_home):
    assert run_cycle(gated_home, [WRITE]).exit_code == 8
    assert run_cli("deny", "--home", str(gated_home), "1", "--reason", "not on Fridays").exit_code == 0
    assert run_cycle(gated_home, [done("gave up")]).exit_code == 0
    assert not (gated_home / "workspace" / "report.txt").exists()
    denial = [line for line in notes(gated_home) if line.startswith("[APPROVAL] call 1 denied")]
    assert len(denial) == 1 and denial[0].endswith("not on Fridays")
    assert run_cycle(gated_home, [done("rested")]).exit_code == 0
    assert len([line for line in notes(gated_home) if "call 1 denied" in line]) == 1  # told once
    assert approvals_json(gated_home)[0]["status"] == "denied"


def test_the_same_call_parked_again_keeps_its_id(gated_home):
    assert run_cycle(gated_home, [WRITE]).exit_code == 8
    assert run_cycle(gated_home, [WRITE]).exit_code == 8
    assert [r["id"] for r in approvals_json(gated_home)] == ["1"]


@pytest.mark.parametrize(
    "first, second, message",
    [
        ("approve", "approve", "call 1 is already approved"),
        ("deny", "approve", "call 1 is already denied"),
        ("approve", "deny", "call 1 is already approved"),
    ],
)
def test_deciding_a_decided_call_exits_2_and_changes_nothing(gated_home, first, second, message):
    assert run_cycle(gated_home, [WRITE]).exit_code == 8
    assert run_cli(first, "--home", str(gated_home), "1").exit_code == 0
    digest = tree_digest(gated_home)
    result = run_cli(second, "--home", str(gated_home), "1")
    assert result.exit_code == 2
    assert message in result.stderr
    assert tree_digest(gated_home) == digest


@pytest.mark.parametrize("command", ["approve", "deny"])
def test_an_unknown_id_exits_2_naming_it(gated_home, command):
    assert run_cycle(gated_home, [WRITE]).exit_code == 8
    result = run_cli(command, "--home", str(gated_home), "42")
    assert result.exit_code == 2
    assert "no parked call '42'" in result.stderr and "pending: 1" in result.stderr


def test_approving_works_while_a_cycle_holds_the_home_lock(gated_home):
    assert run_cycle(gated_home, [WRITE]).exit_code == 8
    with home_lock(Home.at(gated_home)):
        assert run_cli("approve", "--home", str(gated_home), "1").exit_code == 0
    assert approvals_json(gated_home)[0]["status"] == "approved"


def test_a_secret_in_parked_args_is_never_stored_nor_printed(gated_home):
    secret = "sk-live-abcdef0123456789"
    call = {"tool": "write_file", "args": {"path": "k.txt", "content": f"key={secret}"}}
    env = {"OPENAI_API_KEY": secret}
    script = gated_home.parent / "secret_script.yaml"
    script.write_text(json.dumps([json.dumps(call)]))
    assert run_cli("run", "--home", str(gated_home), "--model", f"scripted:{script}", env=env).exit_code == 8
    assert secret.encode() not in stored_bytes(gated_home)
    for args in (["approvals"], ["approvals", "--json"], ["approve", "1"]):
        result = run_cli(*args, "--home", str(gated_home), env=env)
        assert result.exit_code == 0 and secret not in result.output


def test_approvals_lists_pending_calls_for_people_and_says_when_there_are_none(gated_home):
    assert "no pending calls" in run_cli("approvals", "--home", str(gated_home)).stdout
    assert run_cycle(gated_home, [WRITE]).exit_code == 8
    out = run_cli("approvals", "--home", str(gated_home)).stdout
    assert "pending" in out and 'write_file({"path": "report.txt"' in out


def test_a_broken_approval_record_is_an_invalid_scratchpad_error(gated_home):
    break_approvals(gated_home)
    result = run_cli("approvals", "--home", str(gated_home))
    assert result.exit_code == 6 and "agent.db: parked call 9 is not an approval record" in result.stderr


def test_mcp_tools_are_gated_by_name_or_by_a_server_pattern():
    gated = gate(Settings(approval_required=["github__*", "shell"]))
    assert gated("github__create_issue") and gated("shell")
    assert not gated("gitlab__create_issue") and not gated("echo")


def test_ungated_tools_run_as_before(gated_home):
    (gated_home / "config.yaml").write_text("workspace: workspace\n")
    assert run_cycle(gated_home, [WRITE, done("ok")]).exit_code == 0
    assert (gated_home / "workspace" / "report.txt").read_text() == "hello"
    assert approvals_json(gated_home) == []


def test_a_gated_call_with_bad_args_is_a_tool_error_not_a_parked_call(gated_home):
    bad = {"tool": "write_file", "args": {"path": "report.txt"}}  # no content
    assert run_cycle(gated_home, [bad, done("ok")]).exit_code == 0
    assert any(line.startswith("[TOOL ERROR] write_file") for line in notes(gated_home))
    assert approvals_json(gated_home) == []


def test_the_models_tools_cannot_reach_the_approvals_file(home):
    (home / "config.yaml").write_text("approval_required: [shell]\n")  # workspace unset: the home
    assert run_cycle(home, [{"tool": "shell", "args": {"command": "date"}}]).exit_code == 8
    forged = [dict(r, status="approved") for r in approvals_json(home)]
    attack = {"tool": "write_file", "args": {"path": "logs/agent.db", "content": json.dumps(forged)}}
    assert run_cycle(home, [attack, done("ok")], "--force").exit_code == 0  # --force: a parked home is held
    assert [r["status"] for r in approvals_json(home)] == ["pending"]


def test_dispatch_returns_a_gated_call_as_parked_and_leaves_the_state_alone(tmp_path):
    settings = Settings(approval_required=["echo"])
    state = fresh_state()
    gated = made(ApprovalGate, tmp_path, settings)
    new, outcome = dispatch(
        state, json.dumps(echo("hi")), build_registry(settings), ToolContext(tmp_path, settings), gates=gated
    )
    assert outcome.kind is Tag.APPROVAL and outcome.args == {"message": "hi"}
    assert new == state


@pytest.mark.slow
def test_cron_sees_exit_8_from_a_real_process_and_approve_unblocks_it(gated_home):
    script = write_script(gated_home.parent, [WRITE], name="cron_script.yaml")
    assert run_agent_process("run", "--home", str(gated_home), "--model", f"scripted:{script}", "-q").returncode == 8
    assert run_agent_process("approve", "--home", str(gated_home), "1").returncode == 0
    script = write_script(gated_home.parent, [done("written")], name="cron_script2.yaml")
    assert run_agent_process("run", "--home", str(gated_home), "--model", f"scripted:{script}", "-q").returncode == 0
    assert (gated_home / "workspace" / "report.txt").read_text() == "hello"


def test_answering_in_a_home_where_nothing_was_parked_exits_2_and_writes_nothing(home):
    digest = tree_digest(home)
    result = run_cli("approve", "--home", str(home), "1")
    assert result.exit_code == 2 and "no parked call '1'" in result.stderr
    assert tree_digest(home) == digest and not (home / "logs").exists()


def test_reset_denies_parked_and_approved_calls_and_drops_queued_edits_meant_for_the_old_memory(gated_home):
    assert run_cycle(gated_home, [WRITE]).exit_code == 8
    assert run_cli("approve", "--home", str(gated_home), "1").exit_code == 0
    with home_lock(Home.at(gated_home)):  # a cycle runs: the task edit is queued in the inbox
        assert run_cli("task", "add", "--home", str(gated_home), "old plan").exit_code == 0
    assert any_rows(Home.at(gated_home), "inbox")

    result = run_cli("reset", "--home", str(gated_home), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["discarded_calls"] == ["1"] and [e["text"] for e in report["discarded_edits"]] == ["old plan"]

    # the next cycle on the new memory runs nothing that was approved for the old one, and hears nothing of it
    assert run_cycle(gated_home, [done("fresh start")]).exit_code == 0
    assert not (gated_home / "workspace" / "report.txt").exists()
    state = read_yaml(gated_home / "scratchpad" / "active.yaml")
    assert "old plan" not in json.dumps(state) and "call 1" not in state["notes"]
    [record] = approvals_json(gated_home)
    assert record["status"] == "denied" and "agent reset" in record["reason"]
    # and a reset with nothing open says nothing of it
    plain = run_cli("reset", "--home", str(gated_home))
    assert plain.exit_code == 0 and "discarded" not in plain.stdout and "denied" not in plain.stdout


def test_reset_with_an_unreadable_approvals_file_exits_6_naming_it_and_changes_nothing(gated_home):
    with home_lock(Home.at(gated_home)):
        assert run_cli("task", "add", "--home", str(gated_home), "queued").exit_code == 0
    break_approvals(gated_home)
    close_all()  # what a command that ended left: the database whole in its file

    def files():
        return {name: digest for name, digest in tree_digest(gated_home).items() if not name.endswith(".lock")}

    before = files()

    result = run_cli("reset", "--home", str(gated_home))

    assert result.exit_code == 6 and "parked call 9 is not an approval record" in result.output
    assert files() == before  # active.yaml, the inbox, the parked calls: all as they were (a lock file aside)


# ------------------------------------------------------------- only a call the policy would run is parked


@pytest.mark.parametrize(
    "gated, call, refusal",
    [
        ("shell", {"tool": "shell", "args": {"command": "run uname"}}, "command 'run' is not allowed"),
        ("write_file", {"tool": "write_file", "args": {"path": "../outside.txt", "content": "x"}}, "contains '..'"),
        ("read_file", {"tool": "read_file", "args": {"path": "/etc/passwd"}}, "outside the workspace"),
        ("http_get", {"tool": "http_get", "args": {"url": "http://127.0.0.1:9/"}}, "only reaches public addresses"),
        ("http_get", {"tool": "http_get", "args": {"url": "ftp://example.com/"}}, "only http and https"),
    ],
)
def test_a_gated_call_the_policy_refuses_is_refused_at_once_with_the_same_tool_error(tmp_path, gated, call, refusal):
    (tmp_path / "workspace").mkdir()
    ctx = ToolContext(tmp_path, Settings(approval_required=[gated], shell_policy="allowlist"))  # refuses `run`
    registry = build_registry(ctx.settings)
    ungated_ctx = ToolContext(tmp_path, Settings(shell_policy="allowlist"))
    ungated_state, ungated = dispatch(fresh_state(), json.dumps(call), registry, ungated_ctx)
    gated = made(ApprovalGate, tmp_path, ctx.settings)
    state, outcome = dispatch(fresh_state(), json.dumps(call), registry, ctx, gates=gated)
    assert outcome.kind is Tag.TOOL_ERROR and refusal in outcome.note
    assert outcome.note == ungated.note and state["notes"] == ungated_state["notes"]


def test_a_gated_call_the_policy_allows_is_still_parked_and_nothing_is_resolved_or_run(tmp_path):
    (tmp_path / "workspace").mkdir()
    ctx = ToolContext(tmp_path, Settings(approval_required=["shell", "http_get", "write_file"]))
    registry, gated = build_registry(ctx.settings), made(ApprovalGate, tmp_path, ctx.settings)
    for call in (
        {"tool": "shell", "args": {"command": "uname"}},
        {"tool": "http_get", "args": {"url": "https://no-such-host.invalid/"}},  # no DNS query before approval
        {"tool": "write_file", "args": {"path": "new.txt", "content": "x"}},
    ):
        _, outcome = dispatch(fresh_state(), json.dumps(call), registry, ctx, gates=gated)
        assert outcome.kind is Tag.APPROVAL, outcome.note
    assert list((tmp_path / "workspace").iterdir()) == []


def test_a_refused_gated_call_ends_no_cycle_and_parks_nothing(home):
    (home / "config.yaml").write_text("approval_required: [shell]\nworkspace: workspace\nshell_policy: allowlist\n")
    write_active(home, {"current_task": "see the system"})
    result = run_cycle(home, [{"tool": "shell", "args": {"command": "run uname"}}, done("refused, so gave up")])
    assert result.exit_code == 0
    assert approvals_json(home) == []
    assert any(line.startswith("[TOOL ERROR] shell(") and "'run' is not allowed" in line for line in notes(home))


def test_under_quiet_a_parked_call_prints_one_line_for_cron_mail(gated_home):
    result = run_cycle(gated_home, [WRITE], "--quiet")
    assert result.exit_code == 8 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert "awaiting approval: call 1 to write_file awaits the operator (agent approve 1 / agent deny 1)" in line
    assert "(exit 8;" in line


def test_status_shows_the_calls_that_wait_with_their_count_and_age(gated_home):
    assert "approvals" not in run_cli("status", "--home", str(gated_home)).stdout  # nothing waits: nothing said
    assert run_cycle(gated_home, [WRITE]).exit_code == 8
    second = [{"tool": "write_file", "args": {"path": "b.txt", "content": "x"}}]
    assert run_cycle(gated_home, second, "--force").exit_code == 8  # --force: a parked home is held
    text = run_cli("status", "--home", str(gated_home))
    assert text.exit_code == 0
    [line] = [line for line in text.stdout.splitlines() if line.startswith("approvals:")]
    assert line.startswith("approvals: 2 call(s) wait for you, the oldest parked ") and "(ids 1, 2;" in line
    data = json.loads(run_cli("status", "--home", str(gated_home), "--json").stdout)["approvals"]
    assert data["pending"] == 2 and data["ids"] == ["1", "2"] and 0 <= data["oldest_age_s"] < 600
    assert data["oldest_parked"] == approvals_json(gated_home)[0]["parked"]


def test_status_with_an_unreadable_approvals_file_says_so_and_exits_0(gated_home):
    break_approvals(gated_home)
    result = run_cli("status", "--home", str(gated_home))
    assert (
        result.exit_code == 0 and "approvals: unknown: " in result.stdout and "agent.db: parked call 9" in result.stdout
    )
    assert json.loads(run_cli("status", "--home", str(gated_home), "--json").stdout)["approvals_error"]


def test_the_approval_gate_holds_a_gated_call_and_parks_it_when_its_outcome_comes_back(tmp_path):
    settings = Settings(approval_required=["echo"], shell_policy="allowlist")
    Home.at(tmp_path).ensure_dirs()
    ctx, tools = ToolContext(tmp_path, settings), build_registry(settings, entry_points=[])
    gated = made(ApprovalGate, tmp_path, settings)
    assert gated.on_action({}, Action(tools["shell"], {"command": "uname"}, ctx)) is None  # not gated
    assert gated.on_action({}, Action(tools["update_scratchpad"], {"notes": "n"}, ctx)) is None  # never gated
    with pytest.raises(NeedsApproval):
        gated.on_action({}, Action(tools["echo"], {"message": "hi"}, ctx))
    state = fresh_state()
    gated.after_action(state, Outcome(Tag.TOOL, "[TOOL] echo(...) -> hi", "echo", {"message": "hi"}))  # nothing held
    assert not any_rows(Home.at(tmp_path), "approval")
    with pytest.raises(Parked, match=r"call 1 to echo awaits the operator") as stop:
        gated.after_action(state, Outcome(Tag.APPROVAL, "[APPROVAL] echo needs approval", "echo", {"message": "hi"}))
    assert stop.value.reason is StopReason.AWAITING_APPROVAL
    assert state["notes"] == '[APPROVAL] call 1 parked for the operator: echo({"message": "hi"})'
    [record] = read_approvals(Home.at(tmp_path))
    assert (record["tool"], record["args"], record["status"]) == ("echo", {"message": "hi"}, "pending")
