"""Secrets: the API key and configured secret variables never reach a file in the home (logs,
snapshots, active.yaml, the index, the archive) nor the run's output; they show as [REDACTED].
scratchpad/ and logs/ are private (0700, files 0600). Shell tool children do not inherit them.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

from tests.helpers import make_home, run_agent_process, run_cli, write_script

API_KEY = "sk-test-0123456789abcdefSECRET"
TOKEN = "tok-fedcba9876543210SECRET"


def _home(tmp_path: Path) -> Path:
    return make_home(tmp_path, "shell_allowlist: [env, printenv, echo]\nsecret_env: [DEPLOY_TOKEN]\n")


def _run(home: Path, script: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {"OPENAI_API_KEY": API_KEY, "DEPLOY_TOKEN": TOKEN}
    return run_agent_process("run", "--home", str(home), "--model", f"scripted:{script}", *extra, env=env)


def _every_file(home: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in home.rglob("*") if p.is_file()}


def test_secrets_never_reach_the_home_or_the_output(tmp_path: Path):
    home = _home(tmp_path)
    script = write_script(
        tmp_path,
        [
            # a model that leaks the key everywhere it can: fields, notes, tool args, the summary
            {
                "tool": "update_scratchpad",
                "args": {
                    "current_task": f"use {API_KEY}",
                    "goals": [f"token {TOKEN}"],
                    "notes": f"key={API_KEY} token={TOKEN}",
                },
            },
            {"tool": "echo", "args": {"message": f"echo {API_KEY} and {TOKEN}"}},
            {"tool": "shell", "args": {"command": f"echo {TOKEN}"}},
            {"tool": "shell", "args": {"command": "env"}},
            {"tool": "no_such_tool", "args": {"x": API_KEY}},
            f"not json at all but it mentions {API_KEY}",
            {"tool": "done", "args": {"summary": f"finished with {API_KEY}"}},
        ],
    )
    result = _run(home, script, "--json")
    assert result.returncode == 0, result.stderr
    for path, data in _every_file(home).items():
        assert API_KEY.encode() not in data, f"API key in {path}"
        assert TOKEN.encode() not in data, f"secret_env value in {path}"
    assert API_KEY not in result.stdout + result.stderr
    assert TOKEN not in result.stdout + result.stderr
    active = (home / "scratchpad" / "active.yaml").read_text()
    assert "[REDACTED]" in active
    after = next((home / "scratchpad").glob("*_after.yaml")).read_text()
    log = next((home / "logs").glob("cycle_*.log")).read_text()
    assert "[REDACTED]" in after and "[REDACTED]" in log
    json.loads(result.stdout.strip().splitlines()[-1])


def test_shell_children_get_a_scrubbed_environment(tmp_path: Path):
    home = _home(tmp_path)
    script = write_script(
        tmp_path,
        [
            {"tool": "shell", "args": {"command": "env"}},
            {"tool": "shell", "args": {"command": "printenv OPENAI_API_KEY"}},
            {"tool": "shell", "args": {"command": "printenv DEPLOY_TOKEN"}},
            {"tool": "shell", "args": {"command": "printenv PATH"}},
            {"tool": "done", "args": {"summary": "checked"}},
        ],
    )
    result = _run(home, script)
    assert result.returncode == 0, result.stderr
    notes = (home / "scratchpad" / "active.yaml").read_text()
    assert "OPENAI_API_KEY=" not in notes and "DEPLOY_TOKEN=" not in notes  # not even the names
    assert "[REDACTED]" not in notes  # nothing to redact: the children never saw the values
    assert notes.count("[exit status 1]") == 2  # printenv found neither variable
    assert "/bin" in notes  # ...while the ordinary environment is passed through


def test_scratchpad_and_logs_are_private(tmp_path: Path):
    home = _home(tmp_path)
    # folders made by someone else with the usual umask, and a world-readable active.yaml
    (home / "scratchpad").chmod(0o755)
    (home / "logs").chmod(0o755)
    (home / "scratchpad" / "active.yaml").chmod(0o644)
    script = write_script(tmp_path, [{"tool": "done", "args": {"summary": "ok"}}])
    old_umask = os.umask(0o000)  # even with a careless umask
    try:
        result = _run(home, script)
    finally:
        os.umask(old_umask)
    assert result.returncode == 0, result.stderr
    for folder in ("scratchpad", "logs"):
        assert stat.S_IMODE((home / folder).stat().st_mode) == 0o700, folder
        files = [p for p in (home / folder).iterdir() if p.is_file()]
        assert files
        for path in files:
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert stat.S_IMODE((home / ".agent.lock").stat().st_mode) == 0o600


def test_fresh_home_is_created_private(tmp_path: Path):
    home = tmp_path / "fresh"
    (home / "scratchpad").mkdir(parents=True)  # a fresh clone's home: the folder, wider than 0700
    script = write_script(tmp_path, [{"tool": "done", "args": {"summary": "ok"}}])
    old_umask = os.umask(0o000)
    try:
        assert run_cli("run", "--home", str(home), "--model", f"scripted:{script}", "-q").exit_code == 0
    finally:
        os.umask(old_umask)
    for folder in ("scratchpad", "logs"):
        assert stat.S_IMODE((home / folder).stat().st_mode) == 0o700
        for path in (home / folder).iterdir():
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_arguments_nested_600_deep_with_a_secret_configured_do_not_crash_the_cycle(tmp_path: Path):
    home = _home(tmp_path)
    deep = "[" * 600 + json.dumps(TOKEN) + "]" * 600
    script = write_script(
        tmp_path, ['{"tool": "echo", "args": {"message": ' + deep + "}}", {"tool": "done", "args": {"summary": "ok"}}]
    )
    proc = _run(home, script, "--json")
    assert proc.returncode == 0, proc.stderr
    assert "[TOOL ERROR] echo" in (home / "scratchpad" / "active.yaml").read_text()
    assert all(TOKEN.encode() not in data for data in _every_file(home).values())
