"""Approvals fail closed: a pattern names an MCP server's tools as the server is configured
(`my-srv__*`) and as its tools are exposed (`my_srv__*`); a pattern that matches no tool is a
warning in doctor, tools and the cycle log; `approvals` and `approve` show the whole call. And a
flood of tool schemas is cut at `tool_schemas_max_bytes`, naming what was left out."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import run_cli, transcript, write_active, write_script

SERVER = """
import asyncio, sys
import mcp_types as types
import mcp.server.stdio
from mcp.server.lowlevel.server import Server

COUNT, PAD = int(sys.argv[1]), int(sys.argv[2])


async def list_tools(ctx, params):
    names = [f"field_{j:03}_" + "x" * 90 for j in range(PAD // 110)]  # a schema of about PAD bytes
    schema = {"type": "object", "properties": {"text": {"type": "string"}, **{n: {"type": "string"} for n in names}}}
    return types.ListToolsResult(tools=[types.Tool(name=f"probe{i}", description=f"probe number {i}",
                                                   input_schema=schema) for i in range(COUNT)])


async def call_tool(ctx, params):
    return types.CallToolResult(content=[types.TextContent(type="text", text="probe ran")])


async def main():
    async with mcp.server.stdio.stdio_server() as (read, write):
        server = Server("probe", on_list_tools=list_tools, on_call_tool=call_tool)
        await server.run(read, write, server.create_initialization_options())

asyncio.run(main())
"""


def _home(tmp_path: Path, count: int = 1, pad: int = 10, **config) -> Path:
    home = tmp_path / "home"
    assert run_cli("init", str(home)).exit_code == 0
    (tmp_path / "server.py").write_text(SERVER)
    servers = {"my-srv": {"command": sys.executable, "args": [str(tmp_path / "server.py"), str(count), str(pad)]}}
    (home / "config.yaml").write_text(yaml.safe_dump({"mcp_servers": servers, **config}))
    write_active(home, {"current_task": "probe it"})
    return home


def _run(home: Path, tmp_path: Path, replies: list):
    script = write_script(tmp_path, replies)
    return run_cli("run", "--home", str(home), "--model", f"scripted:{script}", "--json")


PROBE = {"tool": "my_srv__probe0", "args": {"text": "hi"}}
DONE = {"tool": "done", "args": {"summary": "done"}}


@pytest.mark.parametrize("pattern", ["my-srv__*", "my_srv__*", "my-srv__probe?", "*probe0"])
def test_a_pattern_gates_mcp_tools_named_as_configured_or_as_exposed(tmp_path, pattern):
    home = _home(tmp_path, approval_required=[pattern])
    result = _run(home, tmp_path, [PROBE, DONE])
    assert result.exit_code == 8, result.stdout  # parked: awaiting approval
    assert "probe ran" not in (home / "scratchpad" / "active.yaml").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("pattern", ["my-svr__*", "github__*"])
def test_a_pattern_matching_no_tool_is_a_warning_in_doctor_tools_and_the_cycle_log(tmp_path, pattern):
    home = _home(tmp_path, approval_required=[pattern])
    warning = f"approval_required pattern {pattern!r} matches no tool"
    doctor = json.loads(run_cli("doctor", "--home", str(home), "--json").stdout)
    assert any(c["check"] == "approvals" and c["warning"] and warning in c["detail"] for c in doctor)
    assert warning in run_cli("tools", "--home", str(home)).stderr
    assert _run(home, tmp_path, [DONE]).exit_code == 0
    assert warning in next((home / "logs").glob("cycle_*.log")).read_text()


def test_approvals_and_approve_show_the_whole_call_escaped(tmp_path):
    home = _home(tmp_path, approval_required=["echo"])
    url = "https://example.com/?" + "&".join(f"p{i}=v{i}" for i in range(60)) + "&exfil=\u202eTAIL-END"
    assert _run(home, tmp_path, [{"tool": "echo", "args": {"message": url}}, DONE]).exit_code == 8
    listed = run_cli("approvals", "--home", str(home)).stdout
    answered = run_cli("approve", "1", "--home", str(home)).stdout
    for shown in (listed, answered):
        joined = "".join(line.strip() for line in shown.splitlines()[1:])
        assert "&exfil=\\u202eTAIL-END" in joined and "p59=v59" in joined and "\u202e" not in shown


@pytest.mark.slow
def test_a_flood_of_tool_schemas_is_cut_at_the_budget_naming_what_was_left_out(tmp_path):
    home = _home(tmp_path, count=64, pad=16_000)
    result = _run(home, tmp_path, [DONE])
    assert result.exit_code == 0, result.stdout
    log = next((home / "logs").glob("cycle_*.log")).read_text()
    request_bytes = [int(n) for n in re.findall(r"prompt (\d+) bytes", log)]
    shown = json.dumps(transcript(home))  # what the model was shown
    assert "tools left out: their schemas would pass tool_schemas_max_bytes (32768): my_srv__probe" in shown
    assert request_bytes and max(request_bytes) < 200_000
    doctor = json.loads(run_cli("doctor", "--home", str(home), "--json").stdout)
    assert any(c["check"] == "tools" and "my_srv__probe63" in c["detail"] for c in doctor)
    assert "tools left out" in run_cli("tools", "--home", str(home)).stderr
    listed = json.loads(run_cli("tools", "--home", str(home), "--json").stdout)
    assert 0 < len([t for t in listed if t["name"].startswith("my_srv__")]) < 64
