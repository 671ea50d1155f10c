"""The shell tool: one command as argv (never a shell), under the home's shell policy.

Two concerns, kept apart so each can be hardened on its own:
- what may run: `refusal(ctx, argv)`, the policy (allowlist, any, off) and, under the
  allowlist, each command's argument policy (shell_policy.py) and no path outside the workspace;
- how it runs: `run_capped(...)`, from the workspace, with a scrubbed environment, an output cap and
  a timeout, killing the command's whole process group so nothing it started outlives it.
"""

from __future__ import annotations

import os
import shlex
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from .children import die_with_parent, forget_group, record_group
from .base import ToolContext, ToolError
from .shell_policy import POLICIES, option_refusal
from .workspace import confined_path, workspace_root

if TYPE_CHECKING:
    import subprocess


def shell(ctx: ToolContext, command: str) -> str:
    """Run one command (split like a shell would, but no pipes, redirects or variables) and return its output.

    Args:
        command: the command line, e.g. "date -u" or "ls -l"
    """
    settings = ctx.settings
    argv = allowed_argv(ctx, command)
    import subprocess  # here, not at the top: a cycle that runs no command never imports it

    try:
        proc = subprocess.Popen(
            argv, cwd=ctx.workspace, env=ctx.child_env(), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=die_with_parent(os.getpid()),
        )
    except FileNotFoundError:
        raise ToolError(f"command not found: {argv[0]}") from None
    except OSError as exc:
        raise ToolError(f"cannot run {argv[0]}: {exc.strerror}") from None
    record_group(ctx.home, proc.pid)  # reaped by the next cycle if the agent is killed meanwhile
    try:
        output, cut, timed_out = run_capped(proc, settings.shell_max_output, settings.shell_timeout)
        left_behind = not timed_out and kill_group(proc)
    finally:
        forget_group(ctx.home, proc.pid)
    text = output.decode("utf-8", errors="replace")
    if cut:
        text += f"\n[output cut at {settings.shell_max_output} bytes; {cut} more bytes dropped]"
    if timed_out:
        raise ToolError(f"timed out after {settings.shell_timeout:g}s and was killed; output so far: {text[:200]}")
    if left_behind:  # the command exited but left children behind in its group
        text = f"{text.rstrip()}\n[background processes it left running were killed]"
    if proc.returncode != 0:
        return f"{text.rstrip()}\n[exit status {proc.returncode}]".lstrip()
    return text.rstrip("\n")


# ------------------------------------------------------------------------------- what may run


def allowed_argv(ctx: ToolContext, command: str) -> list[str]:
    """The command split into argv, or the ToolError the policy refuses it with (runs nothing:
    the shell tool's precheck, so a call that would be refused is never parked for approval)."""
    if ctx.settings.shell_policy == "off":
        raise ToolError("the shell tool is turned off in this home's config")
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise ToolError(f"cannot split the command: {exc}") from None
    if not argv:
        raise ToolError("the command is empty")
    problem = refusal(ctx, argv)
    if problem:
        raise ToolError(problem)
    return argv


def refusal(ctx: ToolContext, argv: list[str]) -> str | None:
    """Why the shell policy refuses this command, or None when it may run.

    Under the allowlist: the program must be on it (a bare name), its options must pass its
    argument policy (agent/tools/shell_policy.py), and its operands must be paths inside the
    workspace. A program an operator added without a policy gets the path check on every
    argument. Under `any`, everything runs (an explicit opt-in); every policy needs a workspace.
    """
    return _argument_refusal(ctx, argv) or (
        None if workspace_root(ctx).is_dir() else f"the workspace {ctx.workspace} is not a folder; commands run there")


def _argument_refusal(ctx: ToolContext, argv: list[str]) -> str | None:
    settings = ctx.settings
    if settings.shell_policy != "allowlist":
        return None
    command = argv[0]
    if "/" in command or command not in settings.shell_allowlist:
        return f"command '{command}' is not allowed (allowed: {', '.join(settings.shell_allowlist)})"
    policy = POLICIES.get(command)
    if policy is None:
        return argument_outside_workspace(ctx, argv[1:], _path_candidates)
    problem, operands = option_refusal(command, policy, argv[1:])
    return problem or argument_outside_workspace(ctx, operands, lambda arg: [arg])


def _path_candidates(arg: str) -> list[str]:
    """Every path an argument of a command without a policy may carry: itself, or for an
    option the value after `=`, the value stuck to a short option (`-f/etc/passwd`), and any
    tail starting at `/` or `~` (`-xf/etc`)."""
    if not arg.startswith("-"):
        return [arg]
    found = [arg.split("=", 1)[1]] if "=" in arg else []
    if not arg.startswith("--") and len(arg) > 2:
        found.append(arg[2:])
    found += [arg[i:] for i, ch in enumerate(arg) if ch in "/~"]
    return found


def argument_outside_workspace(ctx: ToolContext, args: list[str], paths_in: Callable[[str], list[str]]) -> str | None:
    """Why one of `args` names a path the model may not reach (absolute, `~`, `..`, a symlink
    out of the workspace, or what the file tools refuse: runtime files, dot-files...), or None."""
    for arg in args:
        for value in paths_in(arg):
            if value.startswith(("/", "~")) or ".." in Path(value).parts:
                return (f"argument '{arg}' names a path outside the workspace; under the allowlist "
                        f"policy commands may only name paths inside it")
            if value in ("", "-"):  # nothing, or standard input (empty)
                continue
            try:
                confined_path(ctx, value)
            except ToolError as exc:
                return f"argument '{arg}': {exc}"
            except (OSError, ValueError):  # a name too long to be a path is not a path
                continue
    return None


# ------------------------------------------------------------------------------- how it runs


def run_capped(proc: subprocess.Popen, cap: int, timeout: float) -> tuple[bytes, int, bool]:
    """(output kept, bytes dropped, timed out): read a child's output keeping at most `cap`
    bytes, and kill its process group on timeout.

    If the cycle is interrupted meanwhile (SIGTERM, Ctrl-C), the group is killed before the
    interruption goes on: a command must never outlive the cycle that started it.
    """
    try:
        return _read_until(proc, cap, timeout)
    except BaseException:
        kill_group(proc)
        raise


def _read_until(proc: subprocess.Popen, cap: int, timeout: float) -> tuple[bytes, int, bool]:
    import selectors
    import subprocess

    kept, dropped = bytearray(), 0
    deadline = time.monotonic() + timeout
    fd = proc.stdout.fileno()
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                kill_group(proc)
                return bytes(kept), dropped, True
            if not selector.select(remaining):
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            room = cap - len(kept)
            kept += chunk[:room]
            dropped += max(0, len(chunk) - room)
    proc.stdout.close()
    try:
        proc.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:  # closed its output but kept running
        kill_group(proc)
        return bytes(kept), dropped, True
    return bytes(kept), dropped, False


def kill_group(proc: subprocess.Popen) -> bool:
    """SIGKILL every process in the command's group (it leads its own session); True if any was left."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
        killed = True
    except (ProcessLookupError, PermissionError):
        killed = False
    proc.wait()
    if proc.stdout and not proc.stdout.closed:
        proc.stdout.close()
    return killed
