"""The file tools: read_file, write_file, append_file, list_dir, confined to the workspace.

Every path goes through `confined_path` (agent/tools/workspace.py): no `..`, no absolute path
or symlink leading out of the workspace, nothing `protection` refuses (runtime files, templates,
dot-files, and code when the workspace is the whole home). Sizes are capped both ways, and
every write replaces the file atomically with a new 0600 file, so it never carries an execute
bit; as root it (and any folder made for it) belongs to `sandbox_uid`, as the whole workspace
does. A write that would leave the workspace over its quota (quota.py) is refused, and one that
passes is added to the cycle's count without a walk. Plugins use `confined_path` for the same
confinement.
"""

from __future__ import annotations

import os
from pathlib import Path

from agent.common.files import atomic_write
from agent.tools.base import ToolContext, ToolError
from agent.tools.quota import ledger, refuse_if_over
from agent.tools.sandbox_identity import hand_over
from agent.tools.workspace import confined_path, make_folders, missing_folders

MAX_LIST_ENTRIES = 200

__all__ = ["append_file", "confined_path", "list_dir", "read_file", "write_file"]  # confined_path: for plugins


def read_file(ctx: ToolContext, path: str) -> str:
    """Read a text file inside the workspace (long files are cut, with a marker).

    Args:
        path: a path relative to the workspace, e.g. "notes/today.txt"
    """
    cap = ctx.settings.file_max_read
    target = confined_path(ctx, path)
    if not target.is_file():
        raise ToolError(f"no such file: {path}")
    size = target.stat().st_size
    with open(target, "rb") as handle:
        data = handle.read(cap)
    text = data.decode("utf-8", errors="replace")
    if size > cap:
        text += f"\n[file is {size} bytes; only the first {cap} were read]"
    return text


def _writable_target(ctx: ToolContext, path: str) -> Path:
    target = confined_path(ctx, path, for_writing=True)
    if target.is_dir():
        raise ToolError(f"'{path}' is a directory")
    return target


def _write_whole(ctx: ToolContext, target: Path, data: bytes, kept: dict | None = None) -> None:
    if len(data) > ctx.settings.file_max_write:
        raise ToolError(f"the file would be {len(data)} bytes, over the {ctx.settings.file_max_write}-byte limit")
    try:
        replaced, new_files, missing = target.stat().st_blocks * 512, 0, []
    except OSError:  # a new file, and the folders of its path that it makes: each takes one block
        replaced, new_files, missing = 0, 1, missing_folders(ctx, target.parent)
    block = os.statvfs(missing[-1].parent).f_bsize if missing else 0  # of the filesystem they go on
    refuse_if_over(ctx, max(0, len(data) - replaced) + len(missing) * block, new_files + len(missing))
    try:
        folders = make_folders(ctx, target.parent)
        atomic_write(target, data)
        hand_over(target, ctx.settings.sandbox_uid)
        ledger(ctx).add(target.stat().st_blocks * 512 - replaced, new_files + folders)
    except Exception as exc:  # DiskError or OSError: tell the model, keep the cycle going
        raise ToolError(str(exc)) from None
    if ctx.origins is not None:  # these bytes are the model's own writing, while they stay (tools/origins.py)
        ctx.origins.wrote_file(target.relative_to(ctx.workspace).as_posix(), data, kept)


def write_file(ctx: ToolContext, path: str, content: str) -> str:
    """Create or replace a text file inside the workspace.

    Args:
        path: a path relative to the workspace, e.g. "hello.txt"
        content: the whole new content of the file
    """
    data = content.encode("utf-8")
    if len(data) > ctx.settings.file_max_write:  # before touching the path at all
        raise ToolError(f"content is {len(data)} bytes, over the {ctx.settings.file_max_write}-byte limit")
    _write_whole(ctx, _writable_target(ctx, path), data)
    return f"wrote {len(data)} bytes to {path}"


def append_file(ctx: ToolContext, path: str, content: str) -> str:
    """Add text to the end of a file inside the workspace (creating it if needed).

    Args:
        path: a path relative to the workspace, e.g. "journal.txt"
        content: the text to add; include a trailing newline if you want one
    """
    data = content.encode("utf-8")
    target = _writable_target(ctx, path)
    old, kept = b"", None
    if target.exists():
        if not target.is_file():
            raise ToolError(f"'{path}' is not a regular file")
        size = target.stat().st_size
        if size + len(data) > ctx.settings.file_max_write:
            raise ToolError(
                f"the file would be {size + len(data)} bytes, over the {ctx.settings.file_max_write}-byte limit"
            )
        old = target.read_bytes()
        if ctx.origins is not None:  # the old bytes keep their origin: appending does not make them its own
            kept = ctx.origins.file_origin(target, ctx.workspace)
    # Rewritten whole and atomically, like every other write: a crash leaves old or new, never half.
    _write_whole(ctx, target, old + data, kept)
    return f"appended {len(data)} bytes to {path} (now {len(old) + len(data)} bytes)"


def reading_precheck(ctx: ToolContext, path: str = ".") -> None:
    """What read_file and list_dir refuse before reading (a path outside the workspace)."""
    confined_path(ctx, path)


def writing_precheck(ctx: ToolContext, path: str, content: str) -> None:
    """What write_file and append_file refuse before writing (a path, content over the limit)."""
    size = len(content.encode("utf-8"))
    if size > ctx.settings.file_max_write:
        raise ToolError(f"content is {size} bytes, over the {ctx.settings.file_max_write}-byte limit")
    _writable_target(ctx, path)


def list_dir(ctx: ToolContext, path: str = ".") -> str:
    """List a folder inside the workspace: folders end in /, symlinks in @, files show their size.

    Args:
        path: a folder relative to the workspace; "." is the workspace itself
    """
    target = confined_path(ctx, path)
    if not target.is_dir():
        raise ToolError(f"no such folder: {path}")
    entries = sorted(target.iterdir(), key=lambda p: p.name)
    lines = []
    for entry in entries[:MAX_LIST_ENTRIES]:
        if entry.is_symlink():
            lines.append(f"{entry.name}@")
        elif entry.is_dir():
            lines.append(f"{entry.name}/")
        else:
            try:
                lines.append(f"{entry.name} ({entry.stat().st_size} bytes)")
            except OSError:
                lines.append(entry.name)
    if len(entries) > MAX_LIST_ENTRIES:
        lines.append(f"[{len(entries) - MAX_LIST_ENTRIES} more entries not shown]")
    return "\n".join(lines) if lines else "(empty folder)"
