"""The workspace quota: `workspace_max_bytes` and `workspace_max_files`, checked after every
command and before and after every file tool's write.

The walk is iterative (an explicit stack, never recursion, so no depth the model builds can
overflow it), never follows a symlink, and stops as soon as it has seen one entry more than
`workspace_max_files`: its cost is bounded by the setting, not by what the model made.
Bytes are disk use (allocated blocks), so a sparse file costs what it really takes.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from agent.tools.base import ToolContext, ToolError


@dataclass(frozen=True)
class Usage:
    bytes: int
    files: int
    complete: bool  # False: the walk stopped at the file limit (the real numbers are higher)


def workspace_usage(root: Path, max_files: int) -> Usage:
    """Bytes and entries (files, folders, links; the root not counted) under `root`."""
    total, count = 0, 0
    stack = [str(root)]
    while stack:
        folder = stack.pop()
        try:
            entries = os.scandir(folder)
        except OSError:
            continue
        with entries:
            for entry in entries:
                count += 1
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                total += info.st_blocks * 512
                if stat.S_ISDIR(info.st_mode):
                    stack.append(entry.path)
                if count > max_files:
                    return Usage(total, count, False)
    return Usage(total, count, True)


def quota_problem(ctx: ToolContext, adding: int = 0, new_files: int = 0) -> str | None:
    """Why the workspace is (or, with `adding` more bytes and `new_files` more files, would be)
    over its quota, or None."""
    settings = ctx.settings
    usage = workspace_usage(ctx.workspace, settings.workspace_max_files)
    files = f"{usage.files}{'' if usage.complete else '+'}"
    if usage.files + new_files > settings.workspace_max_files:
        files = f"{files} (+{new_files})" if new_files else files
        return (
            f"the workspace holds {files} files and folders, over workspace_max_files ({settings.workspace_max_files})"
        )
    if usage.bytes + adding > settings.workspace_max_bytes:
        grown = f"would take {usage.bytes + adding}" if adding else f"takes {usage.bytes}"
        return f"the workspace {grown} bytes, over workspace_max_bytes ({settings.workspace_max_bytes})"
    return None


def refuse_if_over(ctx: ToolContext, adding: int = 0, new_files: int = 0) -> None:
    """A file tool's gate: a ToolError when the write would leave the workspace over its quota."""
    problem = quota_problem(ctx, adding, new_files)
    if problem:
        raise ToolError(f"{problem}; writes are refused until files are removed (the operator may raise the setting)")
