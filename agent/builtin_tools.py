"""The built-in tools. Each is a plain typed function; `TOOLS` turns them into `Tool`s.

Safety is by default: shell runs argv (never a shell) from an allowlist with a timeout and an
output cap; file tools are confined to the workspace and never touch the runtime's own files.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

from .tools import Tool, ToolContext, ToolError

MAX_READ_BYTES = 64 * 1024
MAX_WRITE_BYTES = 256 * 1024


def echo(ctx: ToolContext, message: str) -> str:
    """Return the message unchanged (a way to record something in notes).

    Args:
        message: the text to echo
    """
    return message


def shell(ctx: ToolContext, command: str) -> str:
    """Run one command (split like a shell would, but no pipes, redirects or variables) and return its output.

    Args:
        command: the command line, e.g. "date -u" or "ls -l"
    """
    settings = ctx.settings
    if settings.shell_policy == "off":
        raise ToolError("the shell tool is turned off in this home's config")
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise ToolError(f"cannot split the command: {exc}") from None
    if not argv:
        raise ToolError("the command is empty")
    if settings.shell_policy == "allowlist":
        if "/" in argv[0] or argv[0] not in settings.shell_allowlist:
            allowed = ", ".join(settings.shell_allowlist)
            raise ToolError(f"command '{argv[0]}' is not allowed (allowed: {allowed})")
    try:
        proc = subprocess.Popen(
            argv, cwd=ctx.home, env=ctx.child_env(), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        )
    except FileNotFoundError:
        raise ToolError(f"command not found: {argv[0]}") from None
    except OSError as exc:
        raise ToolError(f"cannot run {argv[0]}: {exc.strerror}") from None
    output, cut, timed_out = _read_capped(proc, settings.shell_max_output, settings.shell_timeout)
    text = output.decode("utf-8", errors="replace")
    if cut:
        text += f"\n[output cut at {settings.shell_max_output} bytes; {cut} more bytes dropped]"
    if timed_out:
        raise ToolError(f"timed out after {settings.shell_timeout:g}s and was killed; output so far: {text[:200]}")
    if proc.returncode != 0:
        return f"{text.rstrip()}\n[exit status {proc.returncode}]".lstrip()
    return text.rstrip("\n")


def _read_capped(proc: subprocess.Popen, cap: int, timeout: float) -> tuple[bytes, int, bool]:
    """Read a child's output keeping at most `cap` bytes; kill its process group on timeout."""
    import selectors

    kept, dropped = bytearray(), 0
    deadline = time.monotonic() + timeout
    fd = proc.stdout.fileno()
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                _kill_group(proc)
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
        _kill_group(proc)
        return bytes(kept), dropped, True
    return bytes(kept), dropped, False


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    if proc.stdout and not proc.stdout.closed:
        proc.stdout.close()


# Paths the runtime owns: a tool writing here could forge or destroy the evidence of a cycle.
_PROTECTED = ("scratchpad", "logs", "config.yaml", ".agent.lock")


def confined_path(ctx: ToolContext, path: str, *, for_writing: bool = False) -> Path:
    """Resolve `path` inside the workspace, or refuse it with a ToolError saying why."""
    if not path or "\x00" in path:
        raise ToolError("the path is empty or contains a NUL byte")
    if ".." in Path(path).parts:
        raise ToolError(f"path '{path}' contains '..'; paths must stay inside the workspace")
    root = ctx.workspace
    candidate = Path(path) if os.path.isabs(path) else root / path
    resolved = candidate.resolve()
    if not resolved.is_relative_to(root):
        how = "resolves through a symlink to" if candidate.absolute() != resolved and candidate.is_relative_to(root) else "is"
        raise ToolError(f"path '{path}' {how} {resolved}, outside the workspace {root}")
    if for_writing:
        inside = resolved.relative_to(ctx.home.resolve()).parts if resolved.is_relative_to(ctx.home.resolve()) else ()
        if inside and inside[0] in _PROTECTED:
            raise ToolError(f"path '{path}' belongs to the runtime ({inside[0]}); tools may not write there")
    return resolved


def read_file(ctx: ToolContext, path: str) -> str:
    """Read a text file inside the workspace (at most 64 KiB).

    Args:
        path: a path relative to the workspace, e.g. "notes/today.txt"
    """
    target = confined_path(ctx, path)
    if not target.is_file():
        raise ToolError(f"no such file: {path}")
    size = target.stat().st_size
    with open(target, "rb") as handle:
        data = handle.read(MAX_READ_BYTES)
    text = data.decode("utf-8", errors="replace")
    if size > MAX_READ_BYTES:
        text += f"\n[file is {size} bytes; only the first {MAX_READ_BYTES} were read]"
    return text


def write_file(ctx: ToolContext, path: str, content: str) -> str:
    """Create or replace a text file inside the workspace (at most 256 KiB).

    Args:
        path: a path relative to the workspace, e.g. "hello.txt"
        content: the whole new content of the file
    """
    from .scratchpad import atomic_write

    data = content.encode("utf-8")
    if len(data) > MAX_WRITE_BYTES:
        raise ToolError(f"content is {len(data)} bytes, over the {MAX_WRITE_BYTES}-byte limit")
    target = confined_path(ctx, path, for_writing=True)
    if target.is_dir():
        raise ToolError(f"'{path}' is a directory")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, data)
    except Exception as exc:  # DiskError or OSError: tell the model, keep the cycle going
        raise ToolError(str(exc)) from None
    return f"wrote {len(data)} bytes to {path}"


TOOLS = [
    Tool.from_function(echo, example={"message": "Hello!"}),
    Tool.from_function(shell, example={"command": "date -u"}),
    Tool.from_function(read_file, example={"path": "input.txt"}),
    Tool.from_function(write_file, example={"path": "hello.txt", "content": "hello"}),
]
