"""Tools from MCP servers: real servers from the package index (mcp-server-time, mcp-server-git)
in real cycles, plus a misbehaving server of our own (crashes, hangs, leaks its environment).

Every server runs with the home as its working directory, so `processes_in(home)` finds any
server a cycle left behind. Timeouts here are the feature under test, never a way to wait.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path

import pytest

from agent.config import Settings
from agent.tools import Tool, ToolContext, build_registry, open_registry
from agent.tools.mcp import McpServers
from agent.tools.mcp_convert import args_schema_of
from tests.helpers import configure, read_yaml, run_agent_process, run_cli, tree_digest, write_active, write_script

TIME_SERVER = {"command": sys.executable, "args": ["-m", "mcp_server_time"]}
SECRET = "sk-test-secret-value-1234567890"
DONE = {"tool": "done", "args": {"summary": "finished"}}

MISBEHAVING_SERVER = '''
import os, sys, time
from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel

server = MCPServer("misbehaving")


class Point(BaseModel):
    x: int
    y: int


@server.tool()
def norm(point: Point, scale: float = 1.0) -> str:
    """A schema with $defs and $ref, which our checker does not read."""
    return f"{(abs(point.x) + abs(point.y)) * scale:g}"


@server.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


@server.tool()
def env(name: str) -> str:
    """Return an environment variable of this server, or <unset>."""
    return os.environ.get(name, "<unset>")


@server.tool()
def named(ctx: str, remote: str, server_name: str) -> str:
    """Arguments named like the client's own parameters."""
    return f"{ctx}/{remote}/{server_name}"


@server.tool()
def crash() -> str:
    """Exit at once, mid-call."""
    print("misbehaving server: crashing now", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool()
def hang() -> str:
    """Never answer."""
    time.sleep(3600)
    return "too late"


server.run()
'''


@pytest.fixture
def misbehaving(tmp_path) -> dict:
    """A server config for a tiny MCP server that crashes, hangs or shows its environment on demand."""
    script = tmp_path / "misbehaving_server.py"
    script.write_text(MISBEHAVING_SERVER)
    return {"command": sys.executable, "args": [str(script)]}


@pytest.fixture
def repo(tmp_path) -> Path:
    """A temporary git repository with one commit."""
    path = tmp_path / "repo"
    path.mkdir()
    git = ["git", "-C", str(path), "-c", "user.name=Tester", "-c", "user.email=tester@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    (path / "README.md").write_text("hello\n")
    subprocess.run([*git, "add", "README.md"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first commit for the agent"], check=True)
    return path


def processes_in(folder: Path) -> dict[int, str]:
    """pid -> command line of each live process whose working directory is inside `folder`."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone, or not ours to look at
            continue
        if Path(cwd).is_relative_to(folder):
            found[int(entry.name)] = cmdline
    return found


def wait_until_gone(pids, timeout: float = 60) -> bool:
    """Whether every process in `pids` exits within `timeout` (a pidfd turns readable when it does)."""
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            if not select.select([fd], [], [], timeout)[0]:
                return False
        finally:
            os.close(fd)
    return True


def run_scripted(home: Path, tmp_path: Path, replies: list, env: dict | None = None) -> subprocess.CompletedProcess:
    script = write_script(tmp_path, replies)
    return run_agent_process("run", "--home", str(home), "--model", f"scripted:{script}", env=env, timeout=180)


def notes_of(home: Path) -> str:
    return read_yaml(home / "scratchpad" / "active.yaml")["notes"]


# ----------------------------------------------------------------------------- real servers


@pytest.mark.slow
def test_time_and_git_servers_from_the_index_work_in_a_real_cycle_and_stop_with_it(home, tmp_path, repo):
    configure(
        home,
        mcp_servers={
            "time": TIME_SERVER,
            "git": {
                "command": sys.executable,
                "args": ["-m", "mcp_server_git", "--repository", str(repo)],
                "tools_enabled": ["git_status", "git_log"],
            },
        },
    )
    proc = run_scripted(
        home,
        tmp_path,
        [
            {"tool": "time__get_current_time", "args": {"timezone": "UTC"}},
            {"tool": "git__git_log", "args": {"repo_path": str(repo)}},
            {"tool": "git__git_status", "args": {"repo_path": str(repo)}},
            {"tool": "git__git_commit", "args": {"repo_path": str(repo), "message": "not enabled"}},
            DONE,
        ],
    )
    assert proc.returncode == 0, proc.stderr
    notes = notes_of(home)
    assert '[TOOL] time__get_current_time({"timezone": "UTC"}) -> {; "timezone": "UTC",; "datetime": ' in notes
    assert "git__git_log" in notes and "Message: first commit for the agent" in notes
    assert "nothing to commit, working tree clean" in notes
    assert "[UNKNOWN TOOL] git__git_commit" in notes  # left out by the server's tools_enabled
    assert processes_in(home) == {}


def test_agent_tools_lists_mcp_tools_with_their_server_under_the_same_policy(home):
    configure(
        home,
        mcp_servers={"time": {**TIME_SERVER, "tools_enabled": ["get_current_time", "time__convert_time"]}},
        tools_disabled=["time__convert_time"],
    )
    result = run_cli("tools", "--home", str(home))
    assert result.exit_code == 0, result.stderr
    assert "time__get_current_time  [mcp:time]" in result.stdout
    assert "    - timezone (string): IANA timezone name" in result.stdout
    assert "turned off by config: time__convert_time" in result.stdout
    listed = {t["name"]: t for t in json.loads(run_cli("tools", "--home", str(home), "--json").stdout)}
    assert listed["time__get_current_time"]["source"] == "mcp:time"
    assert listed["time__get_current_time"]["args_schema"]["required"] == ["timezone"]
    assert "time__convert_time" not in listed and processes_in(home) == {}


def test_agent_doctor_starts_each_server_and_lists_its_tools(home):
    run_cli("init", str(home))
    configure(
        home,
        mcp_servers={"time": TIME_SERVER, "gone": {"command": "no-such-mcp-server-command"}},
        model="scripted:script.yaml",
    )
    write_script(home, [DONE])
    result = run_cli("doctor", "--home", str(home))
    assert result.exit_code == 1  # one server fails
    assert "mcp time    started; 2 tool(s): time__get_current_time, time__convert_time" in result.stdout
    assert "FAIL mcp gone    command not found: no-such-mcp-server-command" in result.stdout
    assert "-> fix: fix mcp_servers.gone in" in result.stdout
    checks = {c["check"]: c for c in json.loads(run_cli("doctor", "--home", str(home), "--json").stdout)}
    assert checks["mcp time"]["ok"] and not checks["mcp gone"]["ok"]
    assert processes_in(home) == {}


# ---------------------------------------------------------------------------- hostile servers


@pytest.mark.slow
def test_a_server_that_does_not_exist_leaves_a_note_and_the_cycle_goes_on(home, tmp_path):
    configure(home, mcp_servers={"gone": {"command": "no-such-mcp-server-command"}, "time": TIME_SERVER})
    proc = run_scripted(home, tmp_path, [{"tool": "time__get_current_time", "args": {"timezone": "UTC"}}, DONE])
    assert proc.returncode == 0, proc.stderr
    notes = notes_of(home)
    assert (
        "[TOOL ERROR] MCP server 'gone' not started: command not found: no-such-mcp-server-command "
        "(its tools are not offered)"
    ) in notes
    assert '"timezone": "UTC"' in notes and "[COMPLETED] finished" in notes
    assert "agent: warning: MCP server 'gone' not started" in proc.stderr


@pytest.mark.slow
def test_a_server_that_never_answers_is_given_up_after_the_start_timeout(home, tmp_path):
    silent = {"command": sys.executable, "args": ["-c", "import time; time.sleep(3600)"]}
    configure(home, mcp_servers={"silent": silent}, mcp_start_timeout=3)
    proc = run_scripted(home, tmp_path, [{"tool": "echo", "args": {"message": "going on"}}, DONE])
    assert proc.returncode == 0, proc.stderr
    notes = notes_of(home)
    assert "MCP server 'silent' not started: did not list its tools within 3s (mcp_start_timeout)" in notes
    assert "-> going on" in notes
    assert processes_in(home) == {}


@pytest.mark.slow
def test_a_server_that_exits_at_start_shows_its_stderr(home, tmp_path):
    broken = {"command": sys.executable, "args": ["-c", "import sys; sys.exit('broken server: missing token')"]}
    configure(home, mcp_servers={"broken": broken})
    proc = run_scripted(home, tmp_path, [DONE])
    assert proc.returncode == 0, proc.stderr
    assert "MCP server 'broken' not started" in notes_of(home)
    assert "its stderr ends: broken server: missing token" in notes_of(home)


@pytest.mark.slow
def test_a_server_that_crashes_mid_cycle_turns_its_calls_into_tool_errors(home, tmp_path, misbehaving):
    configure(home, mcp_servers={"bad": misbehaving, "time": TIME_SERVER})
    proc = run_scripted(
        home,
        tmp_path,
        [
            {"tool": "bad__echo", "args": {"text": "still here"}},
            {"tool": "bad__named", "args": {"ctx": "c", "remote": "r", "server_name": "s"}},
            {"tool": "bad__norm", "args": {"point": {"x": 3, "y": -4}, "scale": 2}},
            {"tool": "bad__norm", "args": {"point": {"x": "three"}}},
            {"tool": "bad__crash", "args": {}},
            {"tool": "bad__echo", "args": {"text": "anyone?"}},
            {"tool": "time__get_current_time", "args": {"timezone": "UTC"}},
            DONE,
        ],
    )
    assert proc.returncode == 0, proc.stderr
    notes = notes_of(home)
    assert '[TOOL] bad__echo({"text": "still here"}) -> still here' in notes
    assert "-> c/r/s" in notes
    assert '[TOOL] bad__norm({"point": {"x": 3, "y": -4}, "scale": 2}) -> 14' in notes
    assert '[TOOL ERROR] bad__norm({"point": {"x": "three"}}): ' in notes and "validation error" in notes
    crash = next(line for line in notes.splitlines() if line.startswith("[TOOL ERROR] bad__crash({})"))
    assert crash.startswith("[TOOL ERROR] bad__crash({}): MCP server 'bad' exited during the cycle; its stderr ends: ")
    assert crash.endswith("misbehaving server: crashing now")
    assert (
        '[TOOL ERROR] bad__echo({"text": "anyone?"}): MCP server \'bad\' is not running: exited during the cycle'
    ) in notes
    assert '"timezone": "UTC"' in notes and "[COMPLETED] finished" in notes


@pytest.mark.slow
def test_a_call_that_hangs_past_mcp_timeout_is_a_tool_error_and_the_server_is_killed(home, tmp_path, misbehaving):
    configure(home, mcp_servers={"bad": misbehaving}, mcp_timeout=2)
    proc = run_scripted(
        home, tmp_path, [{"tool": "bad__hang", "args": {}}, {"tool": "echo", "args": {"message": "on"}}, DONE]
    )
    assert proc.returncode == 0, proc.stderr
    notes = notes_of(home)
    assert "[TOOL ERROR] bad__hang({}): MCP server 'bad' did not answer within 2s (mcp_timeout)" in notes
    assert '[TOOL] echo({"message": "on"}) -> on' in notes
    assert processes_in(home) == {}  # the hung call did not keep it alive past the cycle


@pytest.mark.slow
def test_a_cycle_killed_by_sigterm_stops_its_servers(home, tmp_path, misbehaving):
    configure(home, mcp_servers={"bad": misbehaving}, mcp_timeout=3600)
    script = write_script(tmp_path, [{"tool": "bad__hang", "args": {}}, DONE])
    env = {k: v for k, v in os.environ.items() if k not in ("AGENT_HOME", "AGENT_MODEL")}
    agent = subprocess.Popen(
        [sys.executable, "-m", "agent", "run", "--home", str(home), "--model", f"scripted:{script}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert " started (model " in agent.stdout.readline()  # printed once the servers are up
    assert any("misbehaving_server.py" in p for p in processes_in(home).values())
    agent.terminate()  # before or during the hanging call: either way the cycle fails and stops its servers
    assert agent.wait(timeout=120) == 4
    assert "[CYCLE FAILED]" in notes_of(home) and "interrupted by SIGTERM" in notes_of(home)
    assert processes_in(home) == {}


@pytest.mark.slow
def test_servers_die_with_an_agent_killed_by_sigkill(home, tmp_path, misbehaving):
    """Nothing of the agent runs after SIGKILL: the kernel stops the servers (a hung one too)."""
    configure(home, mcp_servers={"bad": misbehaving, "time": TIME_SERVER}, mcp_timeout=3600)
    script = write_script(tmp_path, [{"tool": "bad__hang", "args": {}}, DONE])
    env = {k: v for k, v in os.environ.items() if k not in ("AGENT_HOME", "AGENT_MODEL")}
    agent = subprocess.Popen(
        [sys.executable, "-m", "agent", "run", "--home", str(home), "--model", f"scripted:{script}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert " started (model " in agent.stdout.readline()  # printed once the servers are up
    servers = processes_in(home)
    assert len(servers) == 2, servers
    agent.kill()
    agent.wait(timeout=60)
    assert wait_until_gone(servers)
    assert processes_in(home) == {}


@pytest.mark.slow
def test_secrets_in_the_agents_environment_do_not_reach_the_server(home, tmp_path, misbehaving):
    configure(
        home, mcp_servers={"bad": {**misbehaving, "env": {"GIVEN": "${AGENT_TEST_PLAIN}", "LITERAL": "as-written"}}}
    )
    proc = run_scripted(
        home,
        tmp_path,
        [
            {"tool": "bad__env", "args": {"name": name}}
            for name in ("OPENAI_API_KEY", "MY_SERVICE_TOKEN", "AGENT_TEST_PLAIN", "GIVEN", "LITERAL")
        ]
        + [DONE],
        env={"OPENAI_API_KEY": SECRET, "MY_SERVICE_TOKEN": "tok-abcdefgh-123", "AGENT_TEST_PLAIN": "plain-value"},
    )
    assert proc.returncode == 0, proc.stderr
    notes = notes_of(home)
    assert '[TOOL] bad__env({"name": "OPENAI_API_KEY"}) -> <unset>' in notes
    assert '[TOOL] bad__env({"name": "MY_SERVICE_TOKEN"}) -> <unset>' in notes
    assert '[TOOL] bad__env({"name": "AGENT_TEST_PLAIN"}) -> <unset>' in notes  # not on the allowlist
    assert '[TOOL] bad__env({"name": "GIVEN"}) -> plain-value' in notes
    assert '[TOOL] bad__env({"name": "LITERAL"}) -> as-written' in notes


@pytest.mark.slow
def test_a_result_holding_a_secret_is_redacted_everywhere(home, tmp_path, misbehaving):
    # The operator hands the server a key on purpose; whatever it sends back is still redacted.
    configure(
        home,
        mcp_servers={
            "bad": {
                **misbehaving,
                "env": {"UPSTREAM_KEY": "${OPENAI_API_KEY}", "SERVICE_TOKEN": "literal-token-987654"},
            }
        },
    )
    proc = run_scripted(
        home,
        tmp_path,
        [
            {"tool": "bad__env", "args": {"name": "UPSTREAM_KEY"}},
            {"tool": "bad__env", "args": {"name": "SERVICE_TOKEN"}},
            {"tool": "bad__echo", "args": {"text": f"leak {SECRET} leak"}},
            DONE,
        ],
        env={"OPENAI_API_KEY": SECRET},
    )
    assert proc.returncode == 0, proc.stderr
    notes = notes_of(home)
    assert '[TOOL] bad__env({"name": "UPSTREAM_KEY"}) -> [REDACTED]' in notes
    assert '[TOOL] bad__env({"name": "SERVICE_TOKEN"}) -> [REDACTED]' in notes
    assert "-> leak [REDACTED] leak" in notes
    for path in home.rglob("*"):
        if path.is_file() and path.name != "config.yaml":  # the operator's own file holds what they wrote
            data = path.read_bytes()
            assert SECRET.encode() not in data and b"literal-token-987654" not in data, path
    assert SECRET not in proc.stdout + proc.stderr


@pytest.mark.slow
def test_an_env_reference_to_an_unset_variable_leaves_the_server_out(home, tmp_path, misbehaving):
    configure(home, mcp_servers={"bad": {**misbehaving, "env": {"TOKEN": "${AGENT_TEST_NOT_SET}"}}})
    proc = run_scripted(home, tmp_path, [DONE])
    assert proc.returncode == 0, proc.stderr
    assert "MCP server 'bad' not started: env TOKEN: the variable AGENT_TEST_NOT_SET is not set" in notes_of(home)


# ------------------------------------------------------------------------------ configuration


@pytest.mark.parametrize(
    "servers, fragment",
    [
        (["time"], "setting 'mcp_servers' must be a mapping"),
        ({"time": "mcp-server-time"}, "setting 'mcp_servers.time' must be a mapping"),
        ({"time": {"args": ["x"]}}, "setting 'mcp_servers.time' is missing 'command'"),
        ({"time": {"command": "x", "cmd": "y"}}, "setting 'mcp_servers.time' has an unexpected key 'cmd'"),
        ({"time": {"command": "x", "args": "-m x"}}, "setting 'mcp_servers.time.args' must be a list of strings"),
        ({"time": {"command": "x", "args": [1]}}, "setting 'mcp_servers.time.args[0]' must be a string"),
        ({"time": {"command": "x", "env": {"A": 1}}}, "setting 'mcp_servers.time.env.A' must be a string"),
        (
            {"time": {"command": "x", "env": {"A B": "1"}}},
            "'mcp_servers.time.env': 'A B' is not an environment variable",
        ),
        (
            {"time": {"command": "x", "tools_enabled": "a"}},
            "'mcp_servers.time.tools_enabled' must be a list of strings",
        ),
        ({"time": {"command": "  "}}, "setting 'mcp_servers.time.command' is empty"),
        ({"my server": {"command": "x"}}, "server name 'my server' must be"),
        ({"x" * 40: {"command": "x"}}, "must be up to 32 letters"),
        ({"time": {"command": "x\0y"}}, "setting 'mcp_servers.time' holds a NUL byte"),
    ],
)
def test_bad_mcp_server_config_exits_2_naming_the_key_and_writes_nothing(home, tmp_path, servers, fragment):
    configure(home, mcp_servers=servers)
    write_active(home, {"notes": "keep"})
    digest = tree_digest(home)
    result = run_cli("run", "--home", str(home), "--model", f"scripted:{write_script(tmp_path, [DONE])}")
    assert result.exit_code == 2 and fragment in result.stderr, result.stderr
    assert tree_digest(home) == digest


@pytest.mark.parametrize("setting", ["mcp_timeout", "mcp_start_timeout"])
def test_mcp_timeouts_must_be_positive(home, tmp_path, setting):
    (home / "config.yaml").write_text(f"{setting}: 0\n")
    result = run_cli("run", "--home", str(home), "--model", f"scripted:{write_script(tmp_path, [DONE])}")
    assert result.exit_code == 2 and f"'{setting}' must be greater than 0" in result.stderr


# ---------------------------------------------------------------------- names, schemas, results


def test_clashing_mcp_tool_names_are_skipped_and_reported(tmp_path):
    settings = Settings(mcp_servers={"my-s": {"command": "x"}, "my_s": {"command": "x"}})
    servers = McpServers(ToolContext(tmp_path, settings))  # never started: tools added by hand
    try:
        for name in ("my-s", "my_s"):
            servers._add_tools(servers._servers[name], [{"name": "t", "inputSchema": {}}, {"name": 5}, "junk"])
        servers.tools.append(Tool("echo", "an impostor", args_schema_of({}), None, source="mcp:x"))
        warnings = []
        registry = build_registry(settings, entry_points=[], mcp=servers, warn=warnings.append)
    finally:
        servers.close()
    assert registry["echo"].source == "built-in" and registry["my_s__t"].source == "mcp:my-s"
    assert warnings == [
        "MCP tool 'my_s__t' of server 'my_s' skipped: another MCP tool has the same name",
        "MCP tool 'echo' skipped: a tool with that name already exists",
    ]
    only = build_registry(settings.replace(tools_enabled=["my_s__t"]), entry_points=[], mcp=servers, warn=print)
    assert only.names() == ["my_s__t", "update_scratchpad", "done"]


def test_the_mcp_package_missing_is_a_problem_per_server_not_a_crash(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "mcp", None)  # import mcp -> ImportError
    settings = Settings(mcp_servers={"time": TIME_SERVER})
    warnings = []
    with open_registry(settings, tmp_path, warn=warnings.append) as registry:
        assert "time__get_current_time" not in registry and "recall" in registry
    assert len(warnings) == 1 and "MCP server 'time' not started: the mcp package is not installed" in warnings[0]
    assert "pip install -e '.[mcp]'" in warnings[0]


def test_processes_in_sees_a_process_started_in_the_folder(tmp_path):
    """The leak check itself works: a child started in the folder is seen, then gone."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], cwd=tmp_path, stdin=subprocess.PIPE
    )
    try:
        assert any("sys.stdin.read()" in p for p in processes_in(tmp_path).values())
    finally:
        child.communicate(b"")
    assert processes_in(tmp_path) == {}


# ------------------------------------------------------------------- a server's whole process tree

FORKING_SERVER = """
import json, os, subprocess, sys
from mcp.server.mcpserver import MCPServer

# A helper in the server's own group and session (no setsid), left running when the server exits.
helper = subprocess.Popen([sys.executable, "-c", "import signal; signal.pause()  # forking-helper"])
server = MCPServer("forking")


@server.tool()
def hang() -> str:
    \"\"\"Never answer.\"\"\"
    signal_pause = __import__("signal").pause
    signal_pause()
    return "too late"


server.run()  # returns when stdin closes: the server exits normally, its helper still running
"""


@pytest.fixture
def forking(tmp_path) -> dict:
    """A server config for an MCP server that starts a helper in its own process group and leaves it."""
    script = tmp_path / "forking_server.py"
    script.write_text(FORKING_SERVER)
    return {"command": sys.executable, "args": [str(script)]}


@pytest.mark.slow
def test_a_helper_a_server_forked_and_left_running_ends_with_the_cycle(home, tmp_path, forking):
    configure(home, mcp_servers={"forking": forking})
    proc = run_scripted(home, tmp_path, [DONE])
    assert proc.returncode == 0, proc.stderr
    assert processes_in(home) == {}  # neither the server nor its helper: its whole group ended


def killed_mid_cycle(home: Path, tmp_path: Path, forking: dict) -> int:
    """A cycle whose forking server is up, killed with SIGKILL; the pid of the helper it left."""
    configure(home, mcp_servers={"forking": forking}, mcp_timeout=3600)
    script = write_script(tmp_path, [{"tool": "forking__hang", "args": {}}, DONE], name="hang.yaml")
    env = {k: v for k, v in os.environ.items() if k not in ("AGENT_HOME", "AGENT_MODEL")}
    agent = subprocess.Popen(
        [sys.executable, "-m", "agent", "run", "--home", str(home), "--model", f"scripted:{script}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert " started (model " in agent.stdout.readline()  # the servers are up, the helper started first
    running = processes_in(home)
    [helper] = [pid for pid, line in running.items() if "forking-helper" in line]
    [server] = [pid for pid in running if pid != helper]
    agent.kill()
    agent.wait(timeout=60)
    assert wait_until_gone([server])  # the kernel killed the server (PR_SET_PDEATHSIG), not its helper
    assert helper in processes_in(home)
    return helper


@pytest.mark.slow
def test_a_helper_left_by_a_cycle_killed_with_sigkill_is_ended_by_the_next_cycle(home, tmp_path, forking):
    killed_mid_cycle(home, tmp_path, forking)
    after = run_scripted(home, tmp_path, [DONE])
    assert after.returncode == 0, after.stderr
    assert processes_in(home) == {}  # the sweep ended the helper; this cycle's own server group ended too


@pytest.mark.slow
def test_doctor_warns_of_what_a_killed_cycles_server_left_running(home, tmp_path, forking):
    helper = killed_mid_cycle(home, tmp_path, forking)
    checks = json.loads(run_cli("doctor", "--home", str(home), "--json").stdout)
    details = [c["detail"] for c in checks if c["check"] == "mcp forking" and c["warning"]]
    assert "1 process(es) its session in a killed cycle left are still running (the next cycle ends them)" in details
    assert helper in processes_in(home)  # doctor reports; the next cycle's sweep, under the lock, ends it
    assert run_scripted(home, tmp_path, [DONE]).returncode == 0 and processes_in(home) == {}


def test_doctor_warns_of_a_server_whose_children_outlived_its_session(home, forking):
    run_cli("init", str(home))
    configure(home, mcp_servers={"forking": forking}, model="scripted:script.yaml")
    write_script(home, [DONE])
    checks = json.loads(run_cli("doctor", "--home", str(home), "--json").stdout)
    [warned] = [c for c in checks if c["check"] == "mcp forking" and c["warning"]]
    assert warned["detail"] == "1 process(es) it started outlived its session (ended with its group)"
    assert processes_in(home) == {}
