"""Every command's output (text and --json), with a state, transcript, index, approvals file and
MCP server full of terminal controls, line separators and bidi controls, holds none of them raw,
and no model-written or server-written field spills onto a line of its own."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml

from agent.common.escape import escape_controls
from tests.helpers import run_cli, write_active
from tests.models.openai_server import OpenAIServer, Reply

# An OSC 52 clipboard write, a screen clear, a window title, a right-to-left override, and every
# character str.splitlines splits on, each followed by a would-be forged line.
EVIL = "\x1b]52;c;ZXZpbA==\x07\x1b[2J\x1b]0;title\x07\u202e\u200f\u2066" + "".join(
    f"{c}FORGED" for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
)
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")

HOSTILE_SERVER = (
    """
import asyncio, sys
import mcp_types as types
import mcp.server.stdio
from mcp.server.lowlevel.server import Server

EVIL = %r
print("server stderr " + EVIL, file=sys.stderr, flush=True)


async def list_tools(ctx, params):
    schema = {"type": "object", "properties": {"arg" + EVIL: {"type": "string", "description": "an arg " + EVIL}}}
    return types.ListToolsResult(tools=[types.Tool(name="probe", description="describes " + EVIL, input_schema=schema)])


async def call_tool(ctx, params):
    return types.CallToolResult(content=[types.TextContent(type="text", text="result " + EVIL)])


async def main():
    async with mcp.server.stdio.stdio_server() as (read, write):
        server = Server("hostile", on_list_tools=list_tools, on_call_tool=call_tool)
        await server.run(read, write, server.create_initialization_options())

asyncio.run(main())
"""
    % EVIL
)


def _call(tool: str, **args) -> dict:
    return {"tool": tool, "args": args}


@pytest.fixture(scope="module")
def hostile_home(tmp_path_factory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("terminal")
    home = root / "home"
    assert run_cli("init", str(home)).exit_code == 0
    (root / "server.py").write_text(HOSTILE_SERVER)
    (home / "config.yaml").write_text(
        yaml.safe_dump(
            {
                "max_retries": 0,
                "request_timeout": 10,
                "approval_required": ["echo"],
                "mcp_servers": {"my-srv": {"command": sys.executable, "args": [str(root / "server.py")]}},
            }
        )
    )
    write_active(
        home,
        {
            "goals": [f"goal {EVIL}"],
            "current_task": f"task {EVIL}",
            "pending_actions": [f"next {EVIL}"],
            "completed_tasks": [{"task": f"old {EVIL}", "summary": f"sum {EVIL}"}],
            "notes": f"note {EVIL}",
            "last_updated": None,
            f"extra{EVIL}": EVIL,
        },
    )
    replies = [
        Reply.chat(_call("my_srv__probe", **{"arg" + EVIL: EVIL}), finish_reason=f"stop{EVIL}"),
        Reply.chat(_call("update_scratchpad", goals=[f"g2 {EVIL}"], notes=f"n2 {EVIL}"), finish_reason=f"stop{EVIL}"),
        Reply.chat(_call("no_such_tool" + EVIL, **{EVIL: EVIL}), finish_reason=EVIL),
        Reply.chat(_call("echo", message=f"https://x.example/?a=1&exfil={EVIL}"), finish_reason=EVIL),
    ]
    env = {"OPENAI_API_KEY": "sk-terminal-test-key"}
    with OpenAIServer(replies=replies) as server:
        env["OPENAI_BASE_URL"] = server.base_url
        first = run_cli("run", "--home", str(home), "--model", "openai:test-model", env=env)
    assert first.exit_code == 8, first.stdout + first.stderr  # the echo call is parked
    approval = json.loads(run_cli("approvals", "--home", str(home), "--json").stdout)[0]["id"]
    return home, {"env": env, "approval": str(approval), "root": root}


def _commands(home: Path, extra: dict) -> list[list[str]]:
    h = ["--home", str(home)]
    cycle = sorted(p.name[len("cycle_") : -len(".log")] for p in (home / "logs").glob("cycle_*.log"))[-1]
    out = []
    for args in (
        ["show"],
        ["show", "--all"],
        ["status"],
        ["history"],
        ["diff"],
        ["task", "list"],
        ["goal", "list"],
        ["tools"],
        ["doctor"],
        ["approvals", "--all"],
        ["logs"],
        ["logs", "--transcript"],
        ["prune", "--keep", "1", "--dry-run"],
    ):
        out.append([*args, *h])
        if args[0] not in ("logs", "prune"):
            out.append([*args, *h, "--json"])
    out.append(["logs", "--transcript", "--json", *h])
    out += [
        ["restore", f"{cycle}:before", *h],
        ["restore", f"{cycle}:before", *h, "--json"],
        ["fork", f"{cycle}:before", str(extra["root"] / "fork"), *h],
        ["approve", extra["approval"], *h],
    ]
    return out


def test_no_command_prints_a_control_line_separator_or_bidi_control_raw(hostile_home):
    home, extra = hostile_home
    for args in _commands(home, extra):
        result = run_cli(*args, env=extra["env"])
        shown = result.stdout + result.stderr
        raw = RAW.search(shown)
        where = shown[max(0, raw.start() - 80) : raw.end() + 40] if raw else ""
        assert raw is None, f"agent {' '.join(args[:2])}: raw {raw.group()!r} in {where!r}"
        if "--json" not in args and args[:2] != ["logs", "--transcript"]:  # a transcript message is multi-line text
            fields = shown.split("notes (")[0] if args[0] == "show" else shown  # notes are lines by design
            forged = [line for line in fields.splitlines() if line.lstrip().startswith("FORGED")]
            assert not forged, f"agent {' '.join(args[:2])}: a field spilled onto its own line: {forged[:3]}"


def test_notes_and_log_lines_are_never_split_by_a_line_separator(hostile_home):
    home, _ = hostile_home
    after = sorted((home / "scratchpad").glob("*_after.yaml"))[0]  # the hostile cycle's (restore ran since)
    notes = yaml.safe_load(after.read_text())["notes"]
    written_by_runtime = [line for line in notes.split("\n") if line.startswith("[")]
    assert written_by_runtime and all(RAW.search(line) is None for line in written_by_runtime)
    for log in (home / "logs").glob("cycle_*.log"):
        assert all(line[:2].isdigit() for line in log.read_text().splitlines())  # each starts with its stamp


def test_the_one_escape_function_escapes_every_line_separator():
    for char in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029\u202e\u2066\u200f\x1b\x07\x00\x9b":
        assert len(f"a{escape_controls(char)}b".splitlines()) == 1 and RAW.search(escape_controls(char)) is None
