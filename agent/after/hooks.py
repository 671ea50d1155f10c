"""`on_cycle_end`: the operator's command, run after every saved cycle (or those `notify_on` names).

The command is trusted (it comes from config.yaml), but it is still kept in a box: an argv list
run without a shell, from the home, in its own session, with the secrets scrubbed from its
environment and the cycle's index record as JSON on stdin. It is bounded by `hook_timeout` (then
its whole process group is killed), and so is what it prints: only its last 2,000 bytes are kept. Whatever happens to it (a non-zero exit, a timeout, a program
not found) is written to the cycle log and nothing else: the cycle is already saved and its exit
code is already decided.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable

from agent.config import RESOLVED, Settings
from agent.secrets import Secrets

# How much of the command's output a failure line in the cycle log quotes.
OUTPUT_QUOTED = 500


def wants_hook(settings: Settings, stop_reason: str) -> bool:
    """Whether this cycle's stop reason runs on_cycle_end (notify_on unset: every one does; `resolved`
    only when notify_on names it)."""
    if not settings.on_cycle_end:
        return False
    if settings.notify_on is None:
        return stop_reason != RESOLVED
    return stop_reason in settings.notify_on


def resolved_record(record: dict, incident: dict) -> dict:
    """What the hook reads on stdin when an incident is resolved: `event: resolved`, the cycle that
    resolved it (`cycle_id`, `exit_code`), `stop_reason: resolved` (so a script that acts on `error`
    does not act on its end) and the incident's record (agent/after/incidents.py `resolved_incident`:
    key, stop_reason, kind, endpoint, task, error, since/until and their times, length_s, cycles)."""
    return {
        "event": RESOLVED,
        "cycle_id": record.get("cycle_id"),
        "exit_code": record.get("exit_code"),
        "stop_reason": RESOLVED,
        "incident": incident,
    }


def run_cycle_end_hook(
    root: Path, settings: Settings, record: dict, secrets: Secrets, log: Callable[[str], None]
) -> str | None:
    """Run on_cycle_end for a cycle whose (redacted) index record is `record`, if it should run.

    Returns None when it succeeded or was not due, else the problem (also logged). Never raises.
    """
    if not wants_hook(settings, str(record.get("stop_reason"))):
        return None
    argv = list(settings.on_cycle_end or [])
    started = time.monotonic()
    try:
        problem, output = _run(
            argv, root, settings.hook_timeout, json.dumps(record).encode() + b"\n", hook_env(root, record, secrets)
        )
    except Exception as exc:  # whatever it is, the cycle has ended and stays as it ended
        problem, output = f"could not run: {type(exc).__name__}: {exc}", ""
    took = time.monotonic() - started
    if problem is None:
        log(f"on_cycle_end: {argv[0]} exited 0 in {took:.2f}s")
        return None
    tail = " ".join(output.split())[-OUTPUT_QUOTED:]
    log(f"on_cycle_end failed: {argv[0]}: {problem} after {took:.2f}s" + (f"; output: {tail}" if tail else ""))
    return problem


def hook_env(root: Path, record: dict, secrets: Secrets) -> dict[str, str]:
    """The environment without secrets, plus the outcome for scripts that do not read JSON."""
    return {
        **secrets.child_env(),
        "AGENT_HOME": str(root),
        "AGENT_CYCLE_ID": str(record.get("cycle_id")),
        "AGENT_STOP_REASON": str(record.get("stop_reason")),
        "AGENT_EXIT_CODE": str(record.get("exit_code")),
        "AGENT_EVENT": str(record.get("event") or "cycle"),  # resolved: an incident ended (resolved_record)
    }


def _run(argv: list[str], root: Path, timeout: float, stdin_data: bytes, env: dict[str, str]) -> tuple[str | None, str]:
    """(the problem or None, the end of the command's stdout and stderr)."""
    return run_command(argv, root, timeout, stdin_data, env)


def run_command(
    argv: list[str],
    root: Path,
    timeout: float,
    stdin_data: bytes,
    env: dict[str, str],
    *,
    stdout_only: bool = False,
    keep: int = 4 * OUTPUT_QUOTED,
    head: bool = False,
    timeout_name: str = "hook_timeout",
) -> tuple[str | None, str]:
    """(the problem or None, `keep` bytes of the command's output: its end, or with `head` its start;
    with `stdout_only` its stderr is dropped). A file carries its stdin (a command that ignores it
    cannot block the write); its output goes through a pipe of which only `keep` bytes are ever
    held (agent/tools/children.py), so a command printing without end costs neither memory nor
    disk, and one that leaves a child holding the pipe does not block the wait. Used by
    on_cycle_end and wake_when (agent/cycle/idle.py)."""
    from agent.tools.children import OutputTail, wait_draining

    output = OutputTail(keep, head=head)
    with tempfile.TemporaryFile() as stdin, contextlib.closing(output):
        stdin.write(stdin_data)
        stdin.seek(0)
        try:
            process = subprocess.Popen(
                argv,
                cwd=root,
                env=env,
                stdin=stdin,
                stdout=output.write_fd,
                stderr=subprocess.DEVNULL if stdout_only else subprocess.STDOUT,
                start_new_session=True,
            )
        except FileNotFoundError:
            return f"program not found: {argv[0]}", ""
        except PermissionError:
            return f"not executable: {argv[0]}", ""
        output.close_writer()
        if wait_draining(process, output, timeout):
            code = process.returncode
            problem = None if code == 0 else (f"killed by signal {-code}" if code < 0 else f"exit {code}")
        else:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            problem = f"timed out after {timeout:g}s ({timeout_name}); its process group was killed"
        return problem, output.text()
