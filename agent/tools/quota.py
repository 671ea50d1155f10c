"""The workspace quota: `workspace_max_bytes` and `workspace_max_files`.

Counting, off the critical path:
- The walk (`workspace_usage`, through workspace.py's `WorkspaceWalk`: one descriptor at a time,
  whatever the depth or the length of the paths) never follows a symlink, and stops one entry
  past `workspace_max_files`: its cost is bounded by the setting.
  Bytes are disk use (allocated blocks), so a sparse file costs what it really takes. It never
  skips what it cannot read: a folder it cannot open or an entry it cannot stat makes the
  workspace over quota until its modes are put right (each cycle's end does: workspace.py).
- A cycle's `Ledger` holds the last count. A sandboxed command starts a new walk as it ends, in
  a thread, while the model writes its next reply; the next command or file tool waits for it.
  A file tool's write adds what it wrote without walking. So a call costs the same with 100 or
  20,000 files in the workspace (bench/sandbox.py).

Bounding, while a command runs (`DiskWatch`): every WATCH_SECONDS the agent reads the workspace
filesystem's used blocks and inodes (statvfs, one system call whatever the workspace holds). Once
they have grown past the room the quota left when the command started, a walk confirms it (other
programs on that filesystem count in the first reading, never in the walk) and the command is
killed. Growth the walk cannot explain (files deleted while held open, O_TMPFILE files, or other
programs' writes) is kept count of, and kills the command past `workspace_max_bytes` (or files).
The overshoot is what the disk takes in one interval plus that walk: nothing in the sandbox
writes faster than the disk (fallocate and io_uring are refused by its seccomp filter), and a
file is at most `sandbox_max_file_bytes` (RLIMIT_FSIZE). docs/reference.md states the bound and
docs/measurements.md what 60 parallel writers reached.

Past the quota, as a filesystem's own quota does: growth is refused, and deleting, truncating
and smaller overwrites still work, so the model can get back under in the same cycle with no
operator. A command then runs with the workspace writable but RLIMIT_FSIZE at 0 (a write that
adds bytes fails with "File too large"), no shared mapping of a file (which writes with no
write() call: sandbox_seccomp.py) and a watch whose ceiling is the use it started with
(a new file or folder past it kills the command); a file tool's write that adds no bytes and no
files is accepted. Only a workspace the walk cannot count is read-only to commands: what it
holds is unknown, so nothing is let in until the cycle's end has put the modes right.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from agent.config import Settings
from agent.tools.base import ToolContext, ToolError
from agent.tools.workspace import WorkspaceWalk

WATCH_SECONDS = 0.05  # how often a running command's disk use is read


@dataclass(frozen=True)
class Usage:
    bytes: int
    files: int
    complete: bool  # False: the walk stopped at the file limit (the real numbers are higher)
    unreadable: str = ""  # a path (relative to the workspace) the walk could not read: over quota


def workspace_usage(root: Path, max_files: int) -> Usage:
    """Bytes and entries (files, folders, links; the root not counted) under `root`."""
    walk = WorkspaceWalk(root, max_files + 1)
    total, count = 0, 0
    for found in walk:
        if walk.unreadable:
            break
        count += 1
        total += found.info.st_blocks * 512
        if count > max_files:
            return Usage(total, count, False)
    return Usage(total, count, True, walk.unreadable[0] if walk.unreadable else "")


def usage_problem(usage: Usage, settings: Settings, adding: int = 0, new_files: int = 0) -> str | None:
    """Why a workspace with `usage` is (or, with `adding` more bytes and `new_files` more files,
    would be) over its quota, or None. Says how far over, so the model knows what to free."""
    if usage.unreadable:
        return (
            f"the workspace cannot be counted: '{usage.unreadable}' cannot be read (its modes shut its owner out), "
            f"so the workspace counts as over its quota until the cycle's end puts the modes right"
        )
    files, limit = usage.files + new_files, settings.workspace_max_files
    if files > limit:
        shown = f"{usage.files}{'' if usage.complete else '+'}" + (f" (+{new_files})" if new_files else "")
        return f"the workspace holds {shown} files and folders, {files - limit} over workspace_max_files ({limit})"
    total, limit = usage.bytes + adding, settings.workspace_max_bytes
    if total > limit:
        grown = f"would take {total}" if adding else f"takes {usage.bytes}"
        return f"the workspace {grown} bytes, {total - limit} over workspace_max_bytes ({limit})"
    return None


# What follows from being over, said wherever a call meets it.
NO_GROWTH = (
    "nothing in the workspace may grow until it is back under (a write that adds bytes or files fails); "
    "deleting or truncating files frees it, and the quota lifts by itself as soon as it is under"
)
READ_ONLY = "the workspace is read-only to commands until the cycle's end puts the modes right"


class Ledger:
    """One cycle's count of its workspace: the last walk, a walk in flight, and the file tools' writes."""

    def __init__(self, root: Path, max_files: int):
        self.root, self.max_files = root, max_files
        self._usage: Usage | None = None
        self._walk: threading.Thread | None = None

    def recount(self) -> None:
        """Start a walk in the background; `usage` waits for it."""
        self.settle()
        self._usage = None
        self._walk = threading.Thread(target=self._count, name="workspace-quota", daemon=True)
        self._walk.start()

    def _count(self) -> None:
        try:
            self._usage = workspace_usage(self.root, self.max_files)
        except Exception as exc:  # noqa: BLE001 - never silently zero: an uncounted workspace is over
            self._usage = Usage(0, 0, True, f". ({type(exc).__name__}: {exc})")

    def settle(self) -> None:
        if self._walk is not None:
            self._walk.join()
            self._walk = None

    def usage(self) -> Usage:
        """The workspace's usage now: the walk in flight's, or a new walk's when there is none."""
        self.settle()
        if self._usage is None:
            self._count()
        assert self._usage is not None
        return self._usage

    def add(self, nbytes: int, files: int) -> None:
        """A file tool wrote `nbytes` more (or fewer) bytes and `files` new files."""
        usage = self.usage()
        self._usage = dataclasses.replace(usage, bytes=max(0, usage.bytes + nbytes), files=usage.files + files)


def ledger(ctx: ToolContext) -> Ledger:
    """The context's ledger (one per cycle: a new context starts a new count)."""
    root, limit = ctx.workspace, ctx.settings.workspace_max_files
    if ctx.ledger is None or (ctx.ledger.root, ctx.ledger.max_files) != (root, limit):
        ctx.ledger = Ledger(root, limit)
    return ctx.ledger


def refuse_if_over(ctx: ToolContext, adding: int = 0, new_files: int = 0) -> None:
    """A file tool's gate: a ToolError when the write would add bytes or files and leave the
    workspace over its quota. A write that adds neither (a smaller or equal overwrite) is let
    through even past the quota: it is how the model gets back under."""
    usage = ledger(ctx).usage()
    if not usage.unreadable and adding <= 0 and new_files <= 0:
        return
    problem = usage_problem(usage, ctx.settings, max(0, adding), new_files)
    if problem:
        after = READ_ONLY if usage.unreadable else NO_GROWTH
        raise ToolError(f"{problem}; {after}")


class DiskWatch:
    """A running command's watch (module docstring): `problem()` is cheap until the workspace's
    filesystem has grown past the room left, then a walk decides.

    Growth the walk cannot explain is counted as well, never forgiven: a file deleted while open,
    or made with O_TMPFILE and never named (or passed over a socket and closed), takes blocks that
    no walk finds, until its command ends. So the filesystem may grow while a command runs by at
    most the room the quota left, plus `workspace_max_bytes` (and files) that no walk explains;
    another program writing to the same filesystem meanwhile counts in the second part."""

    def __init__(self, root: Path, settings: Settings, usage: Usage):
        self.root, self.settings, self.usage = root, settings, usage
        self.start = os.statvfs(root)
        # What the command may take the workspace to: the quota, or the use it started with when it
        # was already over (growth is refused, deletion is not).
        self.ceiling = (max(settings.workspace_max_bytes, usage.bytes), max(settings.workspace_max_files, usage.files))
        # how far the filesystem may grow before the next walk: the room the ceiling leaves
        self.walk_at = (self.ceiling[0] - usage.bytes, self.ceiling[1] - usage.files)

    def problem(self, running: bool = True) -> str | None:
        """Why the command must stop (or, once it has ended, why the workspace is over), with what
        follows for later commands; None: all is well. An ended command holds no unnamed file."""
        grown = self._growth()
        if grown[0] <= self.walk_at[0] and grown[1] <= self.walk_at[1]:
            return None
        usage = workspace_usage(self.root, self.settings.workspace_max_files)
        if usage.unreadable or usage.bytes > self.ceiling[0] or usage.files > self.ceiling[1]:
            found = usage_problem(usage, self.settings) or "the workspace grew while it was over its quota"
            return f"{found}; {READ_ONLY if usage.unreadable else NO_GROWTH}"
        if not running:
            return None
        unseen = (grown[0] - (usage.bytes - self.usage.bytes), grown[1] - (usage.files - self.usage.files))
        limits = (self.settings.workspace_max_bytes, self.settings.workspace_max_files)
        if unseen[0] > limits[0] or unseen[1] > limits[1]:
            return (
                f"while it ran, the workspace's filesystem grew by {unseen[0]} bytes and {unseen[1]} files more than "
                f"the workspace holds, over workspace_max_bytes ({limits[0]}) or workspace_max_files ({limits[1]}): "
                f"files it deleted (or never named) while holding them open, or another program's writes; that "
                f"space comes back as the command ends, so later commands run as before"
            )
        # within bounds: the next walk when the filesystem has grown by what the ceiling leaves now
        self.walk_at = (grown[0] + self.ceiling[0] - usage.bytes, grown[1] + self.ceiling[1] - usage.files)
        return None

    def _growth(self) -> tuple[int, int]:
        """(bytes, files) the workspace's filesystem has grown by since the command started."""
        now = os.statvfs(self.root)
        files = self.start.f_ffree - now.f_ffree if now.f_files else 0  # some filesystems count no inodes
        return (self.start.f_bfree - now.f_bfree) * now.f_frsize, files
