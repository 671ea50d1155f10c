"""No traceback reaches an operator: every command, run as a real process, against a home whose
logs/ cannot be read, and with a reader that has closed the pipe before the command writes.

How logs/ is made unreadable: `chmod 000` stops nobody who runs as root (the kernel lets root's
CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH pass over mode bits), and the suite runs as root in
CI. So, when we are root, each command is started with those two capabilities dropped from its
bounding set (prctl PR_CAPBSET_DROP before exec): it is still root, owns every file, but the
kernel checks mode bits for it as for anyone, and a 000 folder is really unreadable. A guard
test proves that before anything relies on it. As any other user chmod 000 alone does it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from agent.cli import COMMANDS
from agent.store.home import Home
from agent.store.lock import is_locked
from tests.cli.helpers import done, echo
from tests.helpers import REPO, mode_bits_bind_root, write_active, write_script

WRITE = {"tool": "write_file", "args": {"path": "a.txt", "content": "a"}}

# Every command, with the arguments one real use of it takes ({id}: the first cycle; {script}:
# a scripted model; {tmp}: a fresh folder). --home HOME is appended (init and fleet take it as an argument).
USES = {
    "run": [["run", "--model", "scripted:{script}", "--force"]],
    "init": [["init"]],
    "reset": [["reset"], ["reset", "--clean", "--yes"]],
    "tools": [["tools"]],
    "diff": [["diff"], ["diff", "{id}", "active"]],
    "history": [["history"], ["history", "--daily"], ["history", "--json"]],
    "show": [["show"], ["show", "--all"]],
    "status": [["status"], ["status", "--json"]],
    "task": [["task", "list"], ["task", "add", "typed by hand"], ["task", "drop", "1"]],
    "goal": [["goal", "list"], ["goal", "add", "a goal"]],
    "resume": [["resume"]],
    "memory": [
        ["memory"],
        ["memory", "--json"],
        ["memory", "add", "known", "x"],
        ["memory", "--at", "{id}"],
        ["memory", "--history", "known-1"],
    ],
    "consolidate": [["consolidate", "--model", "scripted:{script}"]],
    "prune": [["prune", "--keep", "1"]],
    "doctor": [["doctor"], ["doctor", "--probe"]],
    "logs": [["logs", "{id}"], ["logs", "{id}", "--transcript"]],
    "replay": [["replay", "{id}", "--model", "scripted:{script}"]],
    "restore": [["restore", "{id}:before"]],
    "fork": [["fork", "{id}", "{tmp}/forked"]],
    "approvals": [["approvals"], ["approvals", "--all"]],
    "approve": [["approve", "1"]],
    "deny": [["deny", "2"]],
    "report": [["report", "-o", "{tmp}/report.html"]],
    "fleet": [["fleet"], ["fleet", "--json"]],
    "datasette-metadata": [["datasette-metadata"]],
}
EVERY_USE = [use for name in USES for use in USES[name]]


def test_the_table_covers_every_command():
    assert set(USES) == set(COMMANDS)


@pytest.fixture(scope="module")
def lived_in(tmp_path_factory) -> tuple[Path, str, Path]:
    """A home with history: a done cycle, two parked calls, a pending task. (home, first id, script)."""
    root = tmp_path_factory.mktemp("lived")
    home = root / "home"
    env = _env()
    assert _agent("init", str(home)).returncode == 0
    (home / "config.yaml").write_text("approval_required: [write_file]\nsections: {known: {kind: list, limit: 5}}\n")
    write_active(
        home, {"goals": ["g"], "current_task": "one", "pending_actions": ["two", "three"], "known": ["a fact"]}
    )
    for n, replies in enumerate(
        ([echo("hi"), done("did one")], [WRITE], [{"tool": "write_file", "args": {"path": "b.txt", "content": "b"}}])
    ):
        script = write_script(root, replies, name=f"setup_{n}.yaml")
        run = ["run", "--home", str(home), "--model", f"scripted:{script}", "--force"]  # a parked home is held
        assert _agent(*run, env=env).returncode in (0, 8)
    first = sorted(p.name[: -len("_before.yaml")] for p in (home / "scratchpad").glob("*_before.yaml"))[0]
    return home, first, write_script(root, [done("ok")], name="done.yaml")


@pytest.fixture
def home_copy(lived_in, tmp_path) -> tuple[Path, str, Path]:
    home, first, script = lived_in
    copy = tmp_path / "home"
    shutil.copytree(home, copy, symlinks=True)
    return copy, first, script


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("AGENT_HOME", "AGENT_MODEL", "OPENAI_API_KEY")}
    return dict(env, PYTHONPATH=str(REPO))


def _agent(*args: str, env: dict | None = None, unreadable: bool = False, **kw) -> subprocess.CompletedProcess:
    preexec = mode_bits_bind_root if unreadable and os.geteuid() == 0 else None
    kw.setdefault("timeout", 120)
    return subprocess.run([sys.executable, "-m", "agent", *args], env=env or _env(), preexec_fn=preexec, **kw)


def _argv(use: list[str], home: Path, first: str, script: Path, tmp: Path) -> list[str]:
    filled = [part.format(id=first, script=script, tmp=tmp) for part in use]
    return filled + [str(home)] if use[0] in ("init", "fleet") else filled + ["--home", str(home)]


def _whole_files(home: Path) -> None:
    """Nothing half-written: every YAML and JSON file in the home still parses."""
    for path in (home / "scratchpad").glob("*.yaml"):
        yaml.safe_load(path.read_text())
    for path in (home / "scratchpad").glob("*.json"):
        json.loads(path.read_text())


def test_the_setup_really_makes_logs_unreadable(home_copy):
    home, _, _ = home_copy
    os.chmod(home / "logs", 0)
    try:
        probe = _agent("-c", "x", unreadable=True, capture_output=True)  # a click usage error: proves we start
        assert probe.returncode == 2
        reader = subprocess.run(
            [sys.executable, "-c", f"open({str(home / 'logs' / 'agent.db')!r})"],
            preexec_fn=mode_bits_bind_root if os.geteuid() == 0 else None,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert reader.returncode == 1 and "PermissionError" in reader.stderr
    finally:
        os.chmod(home / "logs", 0o700)


@pytest.mark.slow
@pytest.mark.parametrize("use", EVERY_USE, ids=[" ".join(u) for u in EVERY_USE])
def test_every_command_with_an_unreadable_logs_folder_says_so_with_a_documented_code(home_copy, tmp_path, use):
    home, first, script = home_copy
    active = (home / "scratchpad" / "active.yaml").read_bytes()
    os.chmod(home / "logs", 0)
    try:
        proc = _agent(*_argv(use, home, first, script, tmp_path), unreadable=True, capture_output=True, text=True)
    finally:
        os.chmod(home / "logs", 0o700)
    assert "Traceback" not in proc.stderr and "Error:" not in proc.stderr.replace("agent: error:", ""), proc.stderr
    if use[0] == "doctor":  # doctor's own contract: a failed check is a FAIL line and exit 1
        assert proc.returncode == 1 and "FAIL logs/" in proc.stdout
    elif use[0] == "fleet":  # fleet's: a home it cannot read is a row that needs a person, exit 1
        assert proc.returncode == 1 and "cannot use" in proc.stdout and "logs" in proc.stdout
    elif proc.returncode != 0:
        assert proc.returncode == 7, proc.stderr
        [line] = proc.stderr.splitlines()
        assert line.startswith("agent: error: ") and str(home / "logs") in line
        assert (home / "scratchpad" / "active.yaml").read_bytes() == active  # a refused command changed nothing
    _whole_files(home)


@pytest.mark.slow
@pytest.mark.parametrize("use", EVERY_USE, ids=[" ".join(u) for u in EVERY_USE])
def test_every_command_whose_reader_closed_the_pipe_exits_0_and_prints_nothing(home_copy, tmp_path, use):
    home, first, script = home_copy
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte (`| head -0`): every write fails
    try:
        proc = _agent(*_argv(use, home, first, script, tmp_path), stdout=write_end, stderr=subprocess.PIPE, text=True)
    finally:
        os.close(write_end)
    # fleet keeps its exit code, as run does (the home has parked calls: it needs a person)
    assert proc.returncode == (1 if use[0] == "fleet" else 0), proc.stderr
    if use[0] != "replay":  # replay reports its progress on stderr by design; nothing about the pipe
        assert proc.stderr == ""
    assert not any(word in proc.stderr for word in ("Traceback", "rror", "Exception", "pipe")), proc.stderr
    _whole_files(home)


def test_show_piped_into_head_prints_one_line_and_exits_0(home_copy):
    home, _, _ = home_copy
    shell = f'{sys.executable} -m agent show --home {home} | head -1; echo "status=${{PIPESTATUS[0]}}"'
    proc = subprocess.run(["bash", "-c", shell], env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.stderr == ""
    assert proc.stdout.splitlines()[-1] == "status=0" and len(proc.stdout.splitlines()) == 2


@pytest.mark.parametrize("command", [["status"], ["history"], ["diff"]])
def test_a_folder_where_the_database_should_be_is_one_line_and_exit_7(home_copy, command):
    home, _, _ = home_copy
    (home / "logs" / "agent.db").unlink()
    (home / "logs" / "agent.db").mkdir()
    proc = _agent(*command, "--home", str(home), capture_output=True, text=True)
    assert proc.returncode == 7 and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines() == [proc.stderr.strip()] and "agent.db: Is a directory" in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("use", EVERY_USE, ids=[" ".join(u) for u in EVERY_USE])
def test_every_command_with_a_fifo_among_an_older_releases_files_ends_at_once_and_says_so(home_copy, tmp_path, use):
    """A FIFO where an older release's file was (logs/index.jsonl) is never opened for reading:
    each command ends within seconds, having either no need of the records (`tools`, `show`) or
    refused in one line with exit 6 (doctor and fleet by their own contracts), and leaves the lock free."""
    home, first, script = home_copy
    active = (home / "scratchpad" / "active.yaml").read_bytes()
    os.mkfifo(home / "logs" / "index.jsonl")
    proc = _agent(*_argv(use, home, first, script, tmp_path), capture_output=True, text=True, timeout=30)
    assert "Traceback" not in proc.stderr, proc.stderr
    if use[0] == "doctor":
        assert proc.returncode == 1 and "named pipe (FIFO)" in proc.stdout
    elif use[0] == "fleet":  # the home's row names the file (broken: the records cannot be upgraded)
        assert proc.returncode == 1 and "named pipe (FIFO)" in proc.stdout
    elif proc.returncode != 0:
        assert proc.returncode == 6, proc.stderr
        [line] = proc.stderr.splitlines()
        assert line.startswith(f"agent: error: {home / 'logs' / 'index.jsonl'}: is not a regular file but a named pipe")
    assert (home / "scratchpad" / "active.yaml").read_bytes() == active and (home / "logs" / "index.jsonl").is_fifo()
    assert not is_locked(Home.at(home))
    _whole_files(home)
