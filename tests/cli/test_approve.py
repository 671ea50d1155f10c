"""`agent approvals`, `approve` and `deny` (agent/cli/approve.py) over an approvals file written as
a cycle would, or broken by hand: every call shown whole and escaped, secrets hidden, bad input a
clear error. Parking and running the calls in cycles is in tests/gates/test_approvals.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.gates.approvals import park_call
from agent.store.home import Home
from tests.cli.helpers import json_out
from tests.helpers import run_cli, tree_digest


def files(home: Path) -> dict[str, str]:
    """The home's files but the empty lock files a command may create."""
    return {path: digest for path, digest in tree_digest(home).items() if not path.endswith(".lock")}


SECRET = "tok-approve-0123456789"


def _record(id_: str, status: str, **fields) -> dict:
    return {
        "id": id_,
        "cycle_id": "20260101_000000_01",
        "tool": "shell",
        "args": {"command": "ls"},
        "status": status,
        "parked": "2026-01-01T00:00:00+00:00",
        "decided": None,
        "reason": None,
        "handled_in": None,
        "result": None,
        **fields,
    }


@pytest.fixture
def parked(home: Path) -> Path:
    """A home with one call of every status; the pending one's argument holds escapes and a secret."""
    assert run_cli("init", str(home)).exit_code == 0
    (home / "config.yaml").write_text("secret_env: [DEPLOY_TOKEN]\n")
    records = [
        _record("1", "ran", result="line one\nline two\x1b[2J"),
        _record("2", "denied", reason="not\x07 today"),
        _record("3", "approved"),
        _record("4", "pending", args={"command": f"deploy --token {SECRET} \x1b]0;pwned\x07"}),
    ]
    (home / "scratchpad" / "approvals.json").write_text(json.dumps(records))  # as an older release kept them
    assert run_cli("approvals", "--home", str(home)).exit_code == 0  # the first command moves them in
    assert not (home / "scratchpad" / "approvals.json").exists()
    return home


def test_approvals_lists_only_pending_calls_escaped_and_redacted(parked: Path):
    result = run_cli("approvals", "--home", str(parked), env={"DEPLOY_TOKEN": SECRET})
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == "   4  pending   cycle 20260101_000000_01"
    assert lines[1] == '      shell({"command": "deploy --token [REDACTED] \\u001b]0;pwned\\u0007"})'
    assert len(lines) == 2 and "\x1b" not in result.stdout


def test_approvals_all_shows_every_status_with_its_result_or_reason(parked: Path):
    out = run_cli("approvals", "--all", "--home", str(parked)).stdout.splitlines()
    assert [line.split()[1] for line in out if line.split()[0].isdigit()] == ["ran", "denied", "approved", "pending"]
    assert "      line one line two\\x1b[2J" in out  # the result, on one line
    assert "      reason: not\\x07 today" in out


def test_approvals_json_is_every_record_redacted(parked: Path):
    records = json_out(run_cli("approvals", "--json", "--home", str(parked), env={"DEPLOY_TOKEN": SECRET}))
    assert [r["status"] for r in records] == ["ran", "denied", "approved", "pending"]
    assert SECRET not in json.dumps(records) and "[REDACTED]" in records[3]["args"]["command"]


def test_no_pending_calls_says_how_to_see_decided_ones(parked: Path):
    assert run_cli("deny", "4", "--home", str(parked)).exit_code == 0
    assert run_cli("approvals", "--home", str(parked)).stdout == "no pending calls (--all lists decided ones)\n"


def test_approve_and_deny_say_what_the_next_cycle_does(home: Path):
    assert run_cli("init", str(home)).exit_code == 0
    h = Home.at(home)
    first = park_call(h, "20260101_000000_01", "write_file", {"path": "a.txt", "content": "x" * 150})
    second = park_call(h, "20260101_000000_01", "shell", {"command": "make deploy"})
    approved = run_cli("approve", first, "--home", str(home))
    assert approved.exit_code == 0
    lines = approved.stdout.splitlines()
    assert lines[0] == "call 1 approved: the next cycle runs it first:"
    assert len(lines) == 3 and lines[2].endswith('x"})')  # the whole call, on as many lines as it needs
    denied = json_out(run_cli("deny", second, "--reason", "not on Fridays", "--json", "--home", str(home)))
    assert denied["status"] == "denied" and denied["reason"] == "not on Fridays"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["approve", "9"], "no parked call '9' (pending: 4; `agent approvals` lists them)"),
        (["deny", "1"], "call 1 is already ran; only a pending call can be denied"),
    ],
)
def test_a_bad_id_exits_2_and_changes_nothing(parked: Path, args: list[str], message: str):
    before = files(parked)
    result = run_cli(*args, "--home", str(parked))
    assert result.exit_code == 2 and message in result.stderr
    assert files(parked) == before


def test_answering_in_a_home_where_nothing_was_parked_exits_2(home: Path):
    assert run_cli("init", str(home)).exit_code == 0
    result = run_cli("approve", "1", "--home", str(home))
    assert result.exit_code == 2 and "no call was ever parked" in result.stderr


@pytest.mark.parametrize(
    "records",
    [
        [{"id": "1", "tool": "shell", "args": {}, "status": "pending"}],  # no cycle_id
        [{"id": "1", "cycle_id": 7, "tool": "shell", "args": {}, "status": "pending"}],
        [_record("1", "pending", args=[])],
        [_record("1", "maybe")],
        {"1": "pending"},
    ],
)
def test_an_older_releases_hand_broken_approvals_file_exits_6_naming_it_and_changes_nothing(home: Path, records):
    assert run_cli("init", str(home)).exit_code == 0
    (home / "scratchpad" / "approvals.json").write_text(json.dumps(records))
    before = files(home)
    for args in (["approvals"], ["approvals", "--all"], ["approve", "1"]):
        result = run_cli(*args, "--home", str(home))
        assert result.exit_code == 6 and "approvals.json: not a list of approval records" in result.stderr, args
    assert files(home) == before
