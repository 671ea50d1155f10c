"""Nothing bricks a home or outlives a cycle (issue 13): giant replies, a server that drips its
headers, kill -9 with a command running, closed output pipes, absurd timeouts, odd keys, and
config or rules files that are not files. Real homes, real processes, servers on 127.0.0.1."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agent.common.outcomes import ExitCode
from agent.scratchpad import MAX_SCRATCHPAD_BYTES, read_state_file
from tests.helpers import make_home, run_cli, tree_digest, wait_for, write_active, write_script

DONE = {"tool": "done", "args": {"summary": "went on"}}


def active(home: Path) -> dict:
    state = read_state_file(home / "scratchpad" / "active.yaml", home)
    assert state is not None
    return state


def agent_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "agent", *args]


def agent_env() -> dict:
    return {k: v for k, v in os.environ.items() if k not in ("AGENT_HOME", "AGENT_MODEL", "OPENAI_API_KEY")}


def assert_home_usable(home: Path, tmp_path: Path) -> None:
    """The next `agent run`, `task add` and `show` all work."""
    assert run_cli("task", "add", "one more", "--home", str(home)).exit_code == 0
    shown = run_cli("show", "--json", "--home", str(home))
    assert shown.exit_code == 0, shown.output
    script = write_script(tmp_path, [DONE], "next.yaml")
    assert run_cli("run", "--home", str(home), "--model", f"scripted:{script}", "-q").exit_code == 0


# ------------------------------------------------------------------------- giant replies


@pytest.mark.parametrize(
    "config, refusal",
    [
        ("", "[PARSE ERROR] reply is 5,"),
        ("max_reply_bytes: 10000000\n", "[TOOL ERROR] update_scratchpad refused: field 'goals' would be 5,"),
    ],
    ids=["reply-cap", "field-cap"],
)
def test_a_5_mb_goals_reply_is_refused_and_the_home_is_never_bricked(tmp_path: Path, config, refusal):
    home = make_home(tmp_path, config)
    write_active(home, {"goals": ["keep"], "current_task": "t"})
    giant = {"tool": "update_scratchpad", "args": {"goals": ["g" * 1000] * 5000}}
    script = write_script(tmp_path, [giant, DONE])
    result = run_cli("run", "--home", str(home), "--model", f"scripted:{script}", "--json")
    assert result.exit_code == 0, result.output  # the cycle went on to done
    saved = active(home)
    assert saved["goals"] == ["keep"]
    assert refusal in saved["notes"]
    assert (home / "scratchpad" / "active.yaml").stat().st_size < 10_000
    assert_home_usable(home, tmp_path)


def test_updates_that_together_exceed_the_state_cap_drop_the_cycle_with_a_note(tmp_path: Path):
    """Each value is under the per-field cap; together they would pass the 4 MiB a scratchpad
    may be loaded at: the state as read plus a note is saved instead, and the home stays usable."""
    chunk = 60_000
    count = MAX_SCRATCHPAD_BYTES // chunk + 2
    home = make_home(tmp_path, f"max_reply_bytes: 100000\nmax_iterations: {count + 1}\n")
    write_active(home, {"goals": ["keep"], "current_task": "t", "completed_tasks": ["old"]})
    script = write_script(
        tmp_path,
        [{"tool": "update_scratchpad", "args": {"completed_tasks": [f"{i:03d}" + "c" * chunk]}} for i in range(count)]
        + [DONE],
    )
    result = run_cli("run", "--home", str(home), "--model", f"scripted:{script}", "-q")
    assert result.exit_code == ExitCode.FAILED
    saved = active(home)
    assert saved["completed_tasks"] == ["old"] and saved["current_task"] == "t"
    assert (
        saved["notes"].startswith("[CYCLE FAILED]")
        and f"over the {MAX_SCRATCHPAD_BYTES:,}-byte limit" in saved["notes"]
    )
    assert_home_usable(home, tmp_path)


def test_a_400_kb_reply_of_open_braces_ends_in_parse_errors_within_the_time_budget(tmp_path: Path):
    """Three such replies in a row end the cycle (exit 3) long before a generous bound; the old
    quadratic search took about 50 s for one, with the lock held."""
    home = make_home(tmp_path, "max_reply_bytes: 1000000\ntime_budget: 30\n")
    script = write_script(tmp_path, ["{" * 400_000, "```" * 133_000, "```json" + " \n" * 200_000])
    started = time.monotonic()
    proc = subprocess.run(
        agent_command("run", "--home", str(home), "--model", f"scripted:{script}", "--json"),
        capture_output=True,
        text=True,
        env=agent_env(),
        timeout=120,
    )
    assert proc.returncode == ExitCode.STOPPED, proc.stderr
    assert json.loads(proc.stdout)["stop_reason"] == "parse_errors"
    assert time.monotonic() - started < 30


# -------------------------------------------------------------------------- http_get


class DripServer:
    """A TCP server on 127.0.0.1 that sends an HTTP status line and then one header byte every
    0.2 s, for up to a minute: each read gets data long before a per-read timeout. (The minute
    keeps a regression a failure rather than a hang.)"""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        self.sock.settimeout(0.5)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn: socket.socket):
        with conn:
            try:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\n")
                for _ in range(300):
                    if self.stop.wait(0.2):
                        break
                    conn.sendall(b"X")
            except OSError:
                pass

    def close(self):
        self.stop.set()
        self.sock.close()


@pytest.fixture
def drip_server():
    server = DripServer()
    yield server
    server.close()


def test_http_get_from_a_server_dripping_headers_ends_at_http_timeout(tmp_path: Path, drip_server):
    http_timeout = 2
    home = make_home(tmp_path, f"http_timeout: {http_timeout}\nhttp_allow_networks: [127.0.0.0/8]\n")
    script = write_script(
        tmp_path, [{"tool": "http_get", "args": {"url": f"http://127.0.0.1:{drip_server.port}/"}}, DONE]
    )
    started = time.monotonic()
    result = run_cli("run", "--home", str(home), "--model", f"scripted:{script}", "--json")
    elapsed = time.monotonic() - started
    assert result.exit_code == 0, result.output
    notes = active(home)["notes"]
    assert "[TOOL ERROR] http_get" in notes and f"timed out after {http_timeout}s" in notes
    assert elapsed < http_timeout + 10, f"the call ran {elapsed:.1f}s with http_timeout {http_timeout}"


# ---------------------------------------------------------------- commands and kill -9


def _running(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie has finished)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _pids_with_cmdline(cmdline: bytes) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes() == cmdline:
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and PR_SET_PDEATHSIG are Linux's")
def test_kill_9_of_the_agent_kills_the_shell_command_it_was_running(tmp_path: Path):
    seconds = f"{300 + os.getpid() % 1000}.5"  # a command line no other test runs
    home = make_home(tmp_path, "shell_allowlist: [sleep]\n")
    script = write_script(tmp_path, [{"tool": "shell", "args": {"command": f"sleep {seconds}"}}, DONE])
    agent = subprocess.Popen(
        agent_command("run", "--home", str(home), "--model", f"scripted:{script}", "-q"),
        env=agent_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    command = f"sleep\0{seconds}\0".encode()
    (child,) = wait_for(lambda: _pids_with_cmdline(command), "the shell command to start")
    agent.kill()
    agent.wait(timeout=60)
    wait_for(lambda: not _running(child), "the command to die with the agent")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_the_next_cycle_kills_what_a_killed_cycles_command_left_running(tmp_path: Path):
    """The command's own background child is not covered by the kernel's parent-death signal;
    the process-group record is, at the start of the next cycle."""
    seconds = f"{300 + os.getpid() % 1000}.25"
    home = make_home(tmp_path, "shell_policy: any\n")
    script = write_script(tmp_path, [{"tool": "shell", "args": {"command": f"sh -c 'sleep {seconds} & wait'"}}, DONE])
    agent = subprocess.Popen(
        agent_command("run", "--home", str(home), "--model", f"scripted:{script}", "-q"),
        env=agent_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    (orphan,) = wait_for(lambda: _pids_with_cmdline(f"sleep\0{seconds}\0".encode()), "the background command")
    agent.kill()
    agent.wait(timeout=60)
    assert _running(orphan)  # the shell died with the agent; its background child did not
    nxt = subprocess.run(
        agent_command(
            "run", "--home", str(home), "--model", f"scripted:{write_script(tmp_path, [DONE], 'n.yaml')}", "-q"
        ),
        env=agent_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert nxt.returncode == 0, nxt.stderr
    wait_for(lambda: not _running(orphan), "the next cycle to kill the left-over command")
    assert not list((home / "logs" / ".running").glob("*.json"))


# ------------------------------------------------------------------------ closed output


def _run_with_stdout(home: Path, script: Path, stdout, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        agent_command("run", "--home", str(home), "--model", f"scripted:{script}", *extra),
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=agent_env(),
        timeout=120,
    )


@pytest.mark.parametrize("extra", [(), ("--json",)], ids=["plain", "json"])
def test_a_stdout_pipe_closed_by_its_reader_keeps_the_cycle_and_its_exit_code(tmp_path: Path, extra):
    """`agent run | head -0`: every write to stdout fails with EPIPE (the reader is gone before
    the first line)."""
    home = make_home(tmp_path)
    write_active(home, {"current_task": "t", "pending_actions": ["next"]})
    script = write_script(tmp_path, [{"tool": "echo", "args": {"message": "hi"}}, DONE])
    reader, writer = os.pipe()
    os.close(reader)
    try:
        proc = _run_with_stdout(home, script, writer, *extra)
    finally:
        os.close(writer)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr
    assert active(home)["completed_tasks"] == [{"task": "t", "summary": "went on"}]


def test_a_closed_stdout_keeps_the_cycle_and_writes_nothing_into_the_homes_files(tmp_path: Path):
    """`agent run >&-`: fd 1 is closed, so the first file the cycle opens would get it."""
    home = make_home(tmp_path)
    write_active(home, {"current_task": "t"})
    script = write_script(tmp_path, [DONE])
    proc = subprocess.run(
        [
            "sh",
            "-c",
            'exec "$@" >&-',
            "sh",
            *agent_command("run", "--home", str(home), "--model", f"scripted:{script}", "--json"),
        ],
        stderr=subprocess.PIPE,
        text=True,
        env=agent_env(),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert active(home)["completed_tasks"] == [{"task": "t", "summary": "went on"}]
    for path in (home / "logs").glob("*"):  # the database holds records: it must still be one, whole
        assert b'"cycle_id"' not in path.read_bytes() or path.name == "agent.db"
    database = sqlite3.connect(home / "logs" / "agent.db")
    assert database.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    database.close()


# ---------------------------------------------------------------- config and inputs


@pytest.mark.parametrize("key", ["shell_timeout", "http_timeout", "request_timeout", "time_budget", "lock_wait"])
def test_a_timeout_over_a_day_is_refused_when_config_is_loaded(tmp_path: Path, key):
    home = make_home(tmp_path, f"{key}: 1.0e+10\n")  # YAML 1.1 reads a bare 1e10 as text
    before = tree_digest(home)
    result = run_cli("run", "--home", str(home), "--model", f"scripted:{write_script(tmp_path, [DONE])}")
    assert result.exit_code == ExitCode.USAGE
    assert f"setting '{key}' must be at most 86400 seconds" in result.output
    assert tree_digest(home) == before


def test_wait_flags_over_a_day_are_refused(tmp_path: Path):
    home = make_home(tmp_path)
    for command in (["run"], ["reset"], ["task", "add", "x"]):
        result = run_cli(*command, "--home", str(home), "--wait", "1e10")
        assert result.exit_code == ExitCode.USAGE, (command, result.output)


@pytest.mark.parametrize(
    "command",
    [
        ["show", "--json"],
        ["show"],
        ["diff", "--json"],
        ["task", "list"],
        ["task", "list", "--json"],
        ["goal", "list"],
        ["run"],
    ],
)
@pytest.mark.parametrize(
    "yaml_text",
    ["2024-01-01: e\n", "goals: [a]\nextra: {2024-01-01: e}\n", "goals: [a]\nextra: [{7: seven}]\n"],
    ids=["top", "nested", "in-list"],
)
def test_a_key_that_is_not_a_string_is_refused_by_every_command_that_reads_the_state(
    tmp_path: Path, command, yaml_text
):
    home = make_home(tmp_path)
    assert run_cli("run", "--home", str(home), "--model", f"scripted:{write_script(tmp_path, [DONE])}").exit_code == 0
    write_active(home, yaml_text)
    before = tree_digest(home)
    extra = ["--model", f"scripted:{write_script(tmp_path, [DONE])}"] if command == ["run"] else []
    if command[0] == "diff":
        extra = [next((home / "scratchpad").glob("*_before.yaml")).name.split("_before")[0], "active"]
    result = run_cli(*command, *extra, "--home", str(home))
    assert result.exit_code == ExitCode.INVALID_SCRATCHPAD, result.output
    assert "is not a string but" in result.output and "quote it" in result.output
    assert "Traceback" not in result.output
    assert tree_digest(home) == before


@pytest.mark.parametrize("command", [["status", "--json"], ["status"], ["history", "--json"], ["history"]])
def test_status_and_history_report_a_non_string_key_without_crashing(tmp_path: Path, command):
    home = make_home(tmp_path)
    assert run_cli("run", "--home", str(home), "--model", f"scripted:{write_script(tmp_path, [DONE])}").exit_code == 0
    write_active(home, "goals: [a]\nextra: {2024-01-01: e}\n")
    result = run_cli(*command, "--home", str(home))
    assert result.exit_code == 0, result.output
    if command == ["status", "--json"]:
        assert "is not a string but a date" in json.loads(result.output)["scratchpad_error"]


def _make_huge(path: Path) -> None:
    with open(path, "wb") as handle:
        handle.truncate(2 * 1024 * 1024)


@pytest.mark.parametrize(
    "make, problem",
    [
        (os.mkfifo, "is not a regular file but a named pipe (FIFO)"),
        (Path.mkdir, "is a directory, not a file"),
        (_make_huge, "-byte limit for a"),
    ],
    ids=["fifo", "directory", "huge"],
)
@pytest.mark.parametrize("name", ["config.yaml", "rules.md"])
def test_a_config_or_rules_file_that_is_not_a_usable_file_is_exit_2_without_hanging(
    tmp_path: Path, name, make, problem
):
    home = make_home(tmp_path)
    (home / name).unlink(missing_ok=True)
    make(home / name)
    before = tree_digest(home)
    proc = subprocess.run(
        agent_command("run", "--home", str(home), "--model", f"scripted:{write_script(tmp_path, [DONE])}"),
        capture_output=True,
        text=True,
        env=agent_env(),
        timeout=120,
    )
    assert proc.returncode == ExitCode.USAGE, proc.stderr
    assert f"{home / name}: " in proc.stderr and problem in proc.stderr
    assert tree_digest(home) == before
