"""An MCP server is bounded like the model: what it writes on its stdout (noise is counted, not
parsed, so no traceback per line; a message over MAX_MESSAGE_BYTES is refused as it is read; a
tools/list past MAX_LISTED_TOOLS leaves the server out), and what it gets of the environment (an
allowlist, plus what config.yaml names). The servers: tests/tools/hostile_mcp_server.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from agent.secrets import Secrets
from agent.tools.mcp import MAX_LISTED_TOOLS, BoundedStdout, _Server
from tests.helpers import configure, read_yaml, run_agent_process, write_script

HOSTILE = Path(__file__).parent / "hostile_mcp_server.py"
DONE = {"tool": "done", "args": {"summary": "finished"}}


def hostile(*how: str) -> dict:
    return {"command": sys.executable, "args": [str(HOSTILE), *how]}


def run_cycle(home: Path, tmp_path: Path, replies: list, *flags: str):
    script = write_script(tmp_path, replies)
    return run_agent_process("run", "--home", str(home), "--model", f"scripted:{script}", *flags, timeout=180)


def notes_of(home: Path) -> str:
    return read_yaml(home / "scratchpad" / "active.yaml")["notes"]


def cycle_log(home: Path) -> str:
    [log] = (home / "logs").glob("cycle_*.log")
    return log.read_text()


def test_the_reader_passes_whole_messages_and_counts_the_rest():
    server = _Server("s", {}, Secrets(()))
    reader = BoundedStdout(None, server, limit=64)
    passed = reader.feed(b'{"id": 1}\nnoise\n{"id": 2, "x": "' + b"y" * 100)
    passed += reader.feed(b'"}\n  \n{"id"')
    passed += reader.feed(b": 3}\n")
    assert (
        passed
        == b'{"id": 1}\n'
        + b'{"jsonrpc": "2.0", "id": 2, "error": {"code": -32603, "message": '
        + (b'"the server\'s message was over 0 MiB: refused unread"}}\n')
        + b'{"id": 3}\n'
    )
    assert (server.noise, list(server.noise_tail), server.refused) == (1, ["noise"], 1)


@pytest.mark.slow
def test_twenty_thousand_lines_of_noise_are_one_line_under_quiet_and_counted_in_the_log(home, tmp_path):
    configure(home, mcp_servers={"noisy": hostile("noise", "20000")})
    proc = run_cycle(home, tmp_path, [{"tool": "noisy__small", "args": {}}, DONE], "--quiet")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(proc.stdout.splitlines()) + len(proc.stderr.splitlines()) <= 1, proc.stderr[:2000]
    assert "[TOOL] noisy__small({}) -> ok" in notes_of(home)
    # before each of its three answers (initialize, tools/list, tools/call)
    assert "MCP server 'noisy': 60000 lines of noise on its stdout (not JSON-RPC: dropped)" in cycle_log(home)
    assert "\x1b" not in cycle_log(home)


@pytest.mark.slow
def test_a_40_mb_result_is_refused_as_it_is_read_with_one_tool_error(home, tmp_path):
    configure(home, mcp_servers={"big": hostile("big", "40000000")})
    proc = run_cycle(home, tmp_path, [{"tool": "big__big", "args": {}}, {"tool": "big__small", "args": {}}, DONE])
    assert proc.returncode == 0, proc.stderr
    notes = notes_of(home)
    assert "[TOOL ERROR] big__big({}): MCP call failed: MCPError: the server's message was over 4 MiB" in notes
    assert "[TOOL] big__small({}) -> ok" in notes  # the server goes on
    assert "MCP server 'big': 1 message(s) refused unread (over 4 MiB, or a list of over 1,000 tools)" in cycle_log(
        home
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "how, tools, why",
    [
        ("tools", 100_000, "the server's message was over 4 MiB: refused unread"),
        ("tools", 20_000, f"the server's message lists more than {MAX_LISTED_TOOLS:,} tools: refused unread"),
        ("tools", MAX_LISTED_TOOLS + 1, f"the server's message lists more than {MAX_LISTED_TOOLS:,} tools"),
    ],
    ids=["100,000 tools in 10 MB", "20,000 tools in 2 MB", "one past the stated number"],
)
def test_a_server_listing_too_many_tools_is_left_out_with_one_tool_error(home, tmp_path, how, tools, why):
    configure(home, mcp_servers={"many": hostile(how, str(tools))})
    proc = run_cycle(home, tmp_path, [DONE])
    assert proc.returncode == 0, proc.stderr
    [note] = [line for line in notes_of(home).splitlines() if "MCP server 'many'" in line]
    assert note.startswith("[TOOL ERROR] MCP server 'many' not started: ") and why in note


PLANTED = {
    "GITHUB_PAT": "ghp_planted0123456789abcdef",
    "DATABASE_URL": "postgres://app:hunter2pass@db.internal:5432/app",
    "SLACK_WEBHOOK": "https://hooks.slack.com/services/T0000/B0000/planted0123456789",
    "OPENAI_API_KEY": "sk-planted-0123456789abcdef",
    "AGENT_TEST_PLAIN": "plain-value",  # nothing secret, but not the server's either
}


@pytest.mark.slow
def test_a_server_gets_only_the_allowlist_and_what_config_names(home, tmp_path):
    dumped = tmp_path / "env.json"
    given = {"DB": "${DATABASE_URL}", "MODE": "as-written"}
    configure(home, mcp_servers={"dump": {**hostile("env", str(dumped)), "env": given}})
    script = write_script(tmp_path, [DONE])
    proc = run_agent_process("run", "--home", str(home), "--model", f"scripted:{script}", env=PLANTED, timeout=180)
    assert proc.returncode == 0, proc.stderr
    env = json.loads(dumped.read_text())
    assert not [name for name in PLANTED if name in env]
    assert not [value for value in PLANTED.values() if value in json.dumps({k: v for k, v in env.items() if k != "DB"})]
    assert env["DB"] == PLANTED["DATABASE_URL"] and env["MODE"] == "as-written"  # named in config.yaml: given
    assert {"PATH", "HOME"} <= set(env)
    assert "hunter2pass" not in (home / "scratchpad" / "active.yaml").read_text()
