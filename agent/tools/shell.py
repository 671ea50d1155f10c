"""The shell tool: one command line, under the home's shell policy (docs/reference.md, "Threat model").

- sandbox (what `auto` picks where it works): any command line, run by `/bin/sh -c` in a
  bubblewrap sandbox that keeps it in the workspace (sandbox.py), within the workspace quota
  (quota.py: watched while it runs, counted again after it while the model writes its next
  reply; past it, commands still run but nothing may grow, so deleting files gets it back under);
- allowlist (the fallback): argv, never a shell, each command with its argument policy
  (shell_policy.py) and no operand outside the workspace: `refusal(ctx, argv)`;
- any: argv, any program, with the operator's account (an explicit opt-in that every cycle log
  warns about); off: no shell tool.

How a command runs is shared: `run_capped(...)` reads its output up to a cap and kills its
whole process group at the timeout, so nothing it started outlives it.
"""

from __future__ import annotations

import os
import shlex
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from agent.tools.base import ToolContext, ToolError
from agent.tools.children import die_with_parent, forget_group, record_group
from agent.tools.quota import NO_GROWTH, READ_ONLY, WATCH_SECONDS, DiskWatch, ledger, usage_problem
from agent.tools.sandbox import WHOLE_HOME, Sandbox, SandboxUnavailable, policy_in_force, workspace_is_home
from agent.tools.shell_policy import POLICIES, option_refusal
from agent.tools.workspace import confined_path, keep_for_sandbox, workspace_root

if TYPE_CHECKING:
    import subprocess


class QuotaExceeded(ToolError):
    """A running command took the workspace over its quota and was killed."""


def shell(ctx: ToolContext, command: str) -> str:
    """Run a command line in the workspace and return its output (a refusal says what this home's shell allows).

    Args:
        command: the command line, e.g. "date -u" or "ls -l"
    """
    argv = allowed_argv(ctx, command)
    if argv is None:  # the sandbox: any command line, kept in the workspace by the kernel
        return _sandboxed(ctx, command)
    import subprocess  # here, not at the top: a cycle that runs no command never imports it

    try:
        proc = subprocess.Popen(
            argv,
            cwd=ctx.workspace,
            env=ctx.child_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent(os.getpid()),
        )
    except FileNotFoundError:
        raise ToolError(f"command not found: {argv[0]}") from None
    except OSError as exc:
        raise ToolError(f"cannot run {argv[0]}: {exc.strerror}") from None
    return _result(ctx, proc)


def _sandboxed(ctx: ToolContext, command: str) -> str:
    if not command.strip():
        raise ToolError("the command is empty")
    root = workspace_root(ctx)
    if not root.is_dir():
        raise ToolError(f"the workspace {root} is not a folder; commands run there")
    if workspace_is_home(ctx.home, ctx.settings):
        raise ToolError(f"the sandbox will not run: {WHOLE_HOME}; set workspace to a folder, or shell_policy: auto")
    keep_for_sandbox(root, ctx.settings)
    counted = ledger(ctx)
    usage = counted.usage()  # the count started as the last command ended
    over = usage_problem(usage, ctx.settings)
    if over and not usage.unreadable:
        # Past the quota the watch's ceiling is the use the command starts with: what the last
        # command wrote lands on disk first (delayed allocation, an extent's index block), so the
        # filesystem's own bookkeeping is not taken for this command's growth.
        os.sync()
        counted.recount()
        usage = counted.usage()
        over = usage_problem(usage, ctx.settings)
    # Past the quota, growth is refused and deletion is not (quota.py); a workspace that cannot be
    # counted at all is read-only, and has no watch (its walk would find it unreadable again).
    watch = None if usage.unreadable else DiskWatch(root, ctx.settings, usage)
    try:
        with Sandbox(root, ctx.settings, writable=not usage.unreadable, grow=over is None) as box:
            try:
                proc = box.start(command)
            except SandboxUnavailable as exc:
                raise ToolError(f"the sandbox cannot start: {exc}") from None
            text = _result(ctx, proc, watch=watch and watch.problem)
        now_over = watch and watch.problem(running=False)  # one more look as it ends (a walk only past the room)
    finally:
        counted.recount()  # in the background, while the model writes its next reply
    if now_over:
        raise ToolError(f"{now_over}; the command's output: {text[:200]}")
    if over:
        return f"{text}\n[{over}: {READ_ONLY if usage.unreadable else NO_GROWTH}]".lstrip()
    return text


def _result(ctx: ToolContext, proc: subprocess.Popen, watch: Callable[[], str | None] | None = None) -> str:
    """Read a started command to its end (bounded) and say how it went."""
    settings = ctx.settings
    record_group(ctx.home, proc.pid)  # reaped by the next cycle if the agent is killed meanwhile
    try:
        output, cut, timed_out = run_capped(proc, settings.shell_max_output, settings.shell_timeout, watch)
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


def allowed_argv(ctx: ToolContext, command: str) -> list[str] | None:
    """The command split into argv (allowlist, any), None under the sandbox (which takes any command
    line), or the ToolError the policy refuses it with. Runs nothing: it is the shell tool's precheck,
    so a call that would be refused is never parked for approval."""
    settings = ctx.settings
    if settings.shell_policy == "off":
        raise ToolError("the shell tool is turned off in this home's config")
    if "\x00" in command:
        raise ToolError("the command contains a NUL byte")
    policy = policy_in_force(ctx.home, settings).policy  # auto resolved: sandbox or allowlist
    if policy == "sandbox":
        if not command.strip():
            raise ToolError("the command is empty")
        return None
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise ToolError(f"cannot split the command: {exc}") from None
    if not argv:
        raise ToolError("the command is empty")
    problem = refusal(ctx, argv, policy)
    if problem:
        raise ToolError(problem)
    return argv


def refusal(ctx: ToolContext, argv: list[str], policy: str = "allowlist") -> str | None:
    """Why the shell policy refuses this command, or None when it may run.

    Under the allowlist: the program must be on it (a bare name), its options must pass its
    argument policy (agent/tools/shell_policy.py), and its operands must be paths inside the
    workspace. A program an operator added without a policy gets the path check on every
    argument. Under `any`, everything runs (an explicit opt-in); every policy needs a workspace.
    """
    return (_argument_refusal(ctx, argv) if policy == "allowlist" else None) or (
        None if workspace_root(ctx).is_dir() else f"the workspace {ctx.workspace} is not a folder; commands run there"
    )


def _argument_refusal(ctx: ToolContext, argv: list[str]) -> str | None:
    settings = ctx.settings
    command = argv[0]
    if "/" in command or command not in settings.shell_allowlist:
        return f"command '{command}' is not allowed (allowed: {', '.join(settings.shell_allowlist)})"
    policy = POLICIES.get(command)
    if policy is None:
        unclassified = next((arg for arg in argv[1:] if arg.startswith("+")), None)
        if unclassified is not None:
            return f"argument '{unclassified}' is not one the allowlist can classify (a leading '+' may be an option)"
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
                return (
                    f"argument '{arg}' names a path outside the workspace; under the allowlist "
                    f"policy commands may only name paths inside it"
                )
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


def run_capped(
    proc: subprocess.Popen, cap: int, timeout: float, watch: Callable[[], str | None] | None = None
) -> tuple[bytes, int, bool]:
    """(output kept, bytes dropped, timed out): read a child's output keeping at most `cap`
    bytes, and kill its process group on timeout. `watch`, asked every WATCH_SECONDS (quota.py),
    names a problem that kills the group at once (QuotaExceeded).

    If the cycle is interrupted meanwhile (SIGTERM, Ctrl-C), the group is killed before the
    interruption goes on: a command must never outlive the cycle that started it.
    """
    try:
        return _read_until(proc, cap, timeout, watch)
    except BaseException:
        kill_group(proc)
        raise


def _read_until(
    proc: subprocess.Popen, cap: int, timeout: float, watch: Callable[[], str | None] | None
) -> tuple[bytes, int, bool]:
    import selectors
    import subprocess

    kept, dropped = bytearray(), 0
    deadline = time.monotonic() + timeout
    next_watch = time.monotonic() + WATCH_SECONDS
    fd = proc.stdout.fileno()
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                kill_group(proc)
                return bytes(kept), dropped, True
            if watch is not None and time.monotonic() >= next_watch:
                next_watch = time.monotonic() + WATCH_SECONDS
                problem = watch()
                if problem:
                    raise QuotaExceeded(f"the command was killed: {problem}")
            wait = min(remaining, WATCH_SECONDS) if watch is not None else remaining
            if not selector.select(wait):
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
