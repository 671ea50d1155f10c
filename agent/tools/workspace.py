"""The workspace: the one folder the model's tools may read and write, and the paths it never may.

`confined_path` is the gate every path from the model goes through (file tools, `list_dir`,
the shell's operands, plugins); `protection` is the one rule saying which paths are refused
even inside the workspace.

What the workspace may carry out of the sandbox is kept small by construction:
- `ensure_workspace` (`agent init`, each cycle's start) creates the folder and keeps it and the
  home at 0700, so no other local user can reach what the model made; as root the workspace
  belongs to `sandbox_uid` (sandbox_identity.py), as does everything the file tools write;
- `settle_workspace` (each cycle's end) removes any setuid, setgid or world-write bit that got
  there another way than the sandbox (whose seccomp filter refuses them), makes every folder
  readable by its owner again (an unreadable one holds the quota at "over" until then), and as
  root gives whatever is not the sandbox's to it; `privileged_entries` finds them for doctor.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from agent.common.escape import escape_controls
from agent.config import Settings
from agent.store.home import Home
from agent.tools.base import ToolContext, ToolError
from agent.tools.sandbox_identity import hand_over, outer_ids

# The runtime's own files and the templates `agent reset` installs, at the top of the home.
RUNTIME_NAMES = frozenset(path.name for path in (*Home(Path()).runtime_files, *Home(Path()).operator_files))
# In a whole-home workspace the model uses plain data files only: an allowlist, so a format no one
# thought of (build.rs, a notebook, Taskfile.yml, conftest.PY) is refused. Configuration formats
# (JSON, YAML, TOML, INI, XML) are left out: build tools and task runners read them by name.
DATA_SUFFIXES = frozenset(
    {
        ".txt",
        ".md",
        ".markdown",
        ".rst",
        ".csv",
        ".tsv",
        ".log",
        ".jsonl",
        ".ndjson",
        ".pdf",
        ".png",
        ".jpg",
        ".jpeg",
        ".gif",
        ".webp",
    }
)
# Text files that tools read by name as input or instructions: package and constraint lists, CMake
# lists, and the files coding assistants follow as the operator's instructions (prefixes of the
# name, compared case-insensitively).
READ_BY_NAME = (
    "requirements",
    "constraints",
    "cmakelists",
    "claude",
    "agents",
    "gemini",
    "copilot",
    "cursor",
    "conventions",
)
# The deepest and longest path (inside the workspace) a tool may name: deep trees break walkers.
MAX_PATH_PARTS = 32
MAX_PATH_CHARS = 1024
# Folders whose whole content runs or is imported.
CODE_FOLDERS = frozenset({"bin", "sbin", "__pycache__", "site-packages", "dist-packages", "node_modules"})


def protection(home: Path, workspace: Path, path: Path) -> str | None:
    """Why the model may not read, write or list `path` (absolute, inside the home), or None.

    Whatever the workspace, these are refused:
    - the runtime's files at the top of the home: scratchpad/, logs/, config.yaml, rules.md, examples.yaml,
      .agent.lock, and templates/ (which `agent reset` installs);
    - every dot-file and dot-folder at any depth (.git, .env, .bashrc, .ssh, .venv, ...).
    When the workspace is the whole home (`workspace: "."`), every file that a build tool,
    task runner, notebook or coding assistant could run or read as configuration:
    - everything but plain data files: a name must end in one of DATA_SUFFIXES, compared
      case-insensitively (so code, notebooks, build scripts and configuration formats are out,
      whatever tool reads them);
    - text files tools read by name (READ_BY_NAME: requirement and constraint lists, CMake
      lists, assistant instructions), case-insensitively;
    - files with an execute bit;
    - everything inside a folder holding __init__.py (a package) or named like CODE_FOLDERS
      (at any depth), and *.egg-info folders.
    """
    parts = path.relative_to(home).parts
    if parts and parts[0] in RUNTIME_NAMES:
        return f"belongs to the runtime ({parts[0]})"
    hidden = next((part for part in parts if part.startswith(".")), None)
    if hidden:
        return f"is or is inside a dot-file ({hidden})"
    if workspace != home or not parts:
        return None
    name = parts[-1]
    folder = next((p for p in parts if p.lower() in CODE_FOLDERS or p.lower().endswith(".egg-info")), None)
    if folder:
        return f"is inside a folder of code ({folder})"
    for depth in range(1, len(parts) + 1):
        package = home.joinpath(*parts[:depth])
        if (package / "__init__.py").exists():
            return f"is inside a Python package ({'/'.join(parts[:depth])})"
    with contextlib.suppress(OSError):
        info = path.stat()
        if stat.S_ISREG(info.st_mode) and info.st_mode & 0o111:
            return f"is an executable file ({name})"
        if stat.S_ISDIR(info.st_mode):
            return None  # a folder: what matters is the files in it
    if path.suffix.lower() not in DATA_SUFFIXES or name.lower().startswith(READ_BY_NAME):
        return (
            f"is not a plain data file ({name}): in a whole-home workspace the model keeps to data files "
            f"(code or configuration that a tool may run or read stays the operator's)"
        )
    return None


def confined_path(ctx: ToolContext, path: str, *, for_writing: bool = False) -> Path:
    """Resolve `path` inside the workspace, or refuse it with a ToolError saying why: `..`,
    absolute paths or symlinks leading out of it, and whatever `protection` refuses (checked on
    the path as written and on where it resolves, so no symlink gets round it).

    `for_writing` is kept for plugins that pass it: reads and writes follow the same rule."""
    if not path or "\x00" in path:
        raise ToolError("the path is empty or contains a NUL byte")
    if ".." in Path(path).parts:
        raise ToolError(f"path '{path}' contains '..'; paths must stay inside the workspace")
    _check_size(path, Path(path).parts)
    home, root = ctx.home.resolve(), workspace_root(ctx)
    candidate = Path(path) if os.path.isabs(path) else root / path
    resolved = candidate.resolve()
    if not resolved.is_relative_to(root):
        how = (
            "resolves through a symlink to"
            if candidate.absolute() != resolved and candidate.is_relative_to(root)
            else "is"
        )
        raise ToolError(f"path '{path}' {how} {resolved}, outside the workspace {root}")
    inside = resolved.relative_to(root)
    _check_size(str(inside), inside.parts)
    written = Path(os.path.normpath(candidate))
    for where in dict.fromkeys((written, resolved)):
        problem = where.is_relative_to(home) and protection(home, root, where)
        if problem:
            raise ToolError(f"path '{path}' {problem}; the model's tools may not read or write it")
    return resolved


def _check_size(path: str, parts: tuple[str, ...]) -> None:
    if len(path) > MAX_PATH_CHARS or len(parts) > MAX_PATH_PARTS:
        raise ToolError(
            f"the path is {len(path)} characters and {len(parts)} levels deep; the tools take at most "
            f"{MAX_PATH_CHARS} characters and {MAX_PATH_PARTS} levels"
        )


def workspace_root(ctx: ToolContext) -> Path:
    """The context's workspace folder, or a ToolError when it lies outside the home or is a
    folder the protection rule refuses (a misconfigured `workspace: scratchpad`, `.git`, ...)."""
    home, root = ctx.home.resolve(), ctx.workspace
    problem = protection(home, root, root)
    if problem:
        raise ToolError(f"the configured workspace {root} {problem}; fix 'workspace' in config.yaml")
    return root


def ensure_workspace(home: Path, settings: Settings) -> Path | None:
    """Create the workspace folder if it is missing and keep it and the home private (module
    docstring); its path, or None when it cannot be one (a file or a symlink out of the home stands
    there: the tools then say why to the model)."""
    with contextlib.suppress(OSError):
        (home / settings.workspace).mkdir(mode=PRIVATE_MODE, parents=True, exist_ok=True)
    _narrow(home.resolve())
    resolved = usable_workspace(home, settings)
    if resolved is not None and resolved != home.resolve():
        keep_for_sandbox(resolved, settings)
    return resolved


def usable_workspace(home: Path, settings: Settings) -> Path | None:
    """The workspace folder, resolved, when it is one the tools may use: a folder inside the home
    that the protection rule does not refuse; else None."""
    resolved, root = (home / settings.workspace).resolve(), home.resolve()
    usable = resolved.is_dir() and resolved.is_relative_to(root) and not protection(root, resolved, resolved)
    return resolved if usable else None


PRIVATE_MODE = 0o700
PRIVILEGE_BITS = stat.S_ISUID | stat.S_ISGID | stat.S_IWOTH  # what nothing in the workspace may carry
NAMES_SHOWN = 3


def _narrow(folder: Path) -> None:
    """`folder` at 0700 (when this user may change it)."""
    with contextlib.suppress(OSError):
        if stat.S_IMODE(folder.stat().st_mode) != PRIVATE_MODE:
            folder.chmod(PRIVATE_MODE)


def keep_for_sandbox(workspace: Path, settings: Settings) -> None:
    """The workspace folder itself at 0700 and, as root, the sandbox's (a stat when it already is).
    A folder that was not (a home made before, a replay's copy) is settled whole at once, so the
    sandbox can change what is already in it."""
    _narrow(workspace)
    ids = outer_ids(settings.sandbox_uid)
    with contextlib.suppress(OSError):
        info = workspace.lstat()
        if ids is not None and (info.st_uid, info.st_gid) != ids:
            hand_over(workspace, settings.sandbox_uid)
            _settle_tree(workspace, ids)


def missing_folders(ctx: ToolContext, folder: Path) -> list[Path]:
    """`folder` and its parents that do not exist yet, deepest first (what `make_folders` makes)."""
    missing = []
    while not folder.exists() and folder != ctx.home:
        missing.append(folder)
        folder = folder.parent
    return missing


def make_folders(ctx: ToolContext, folder: Path) -> int:
    """Create `folder` and its missing parents inside the workspace, each one the sandbox's; how many were made."""
    missing = missing_folders(ctx, folder)
    for made in reversed(missing):
        made.mkdir(exist_ok=True)
        hand_over(made, ctx.settings.sandbox_uid)
    return len(missing)


def settle_workspace(home: Path, settings: Settings) -> str | None:
    """At a cycle's end (module docstring): strip privilege bits, reopen folders to their owner and,
    as root, give everything to the sandbox's id. One line saying what was stripped, or None."""
    root = usable_workspace(home, settings)
    if root is None or root == home.resolve():
        return None
    stripped = _settle_tree(root, outer_ids(settings.sandbox_uid))
    if not stripped:
        return None
    names = ", ".join(stripped[:NAMES_SHOWN]) + (
        f" and {len(stripped) - NAMES_SHOWN} more" if len(stripped) > NAMES_SHOWN else ""
    )
    return escape_controls(
        f"workspace: removed setuid, setgid or world-write bits from {len(stripped)} entries ({names})"
    )


def _settle_tree(root: Path, ids: tuple[int, int] | None) -> list[str]:
    """Settle every entry below `root`; the paths that carried a privilege bit."""
    return [found.path for found in WorkspaceWalk(root) if _settle(found, ids)]


def _settle(found: Found, ids: tuple[int, int] | None) -> bool:
    """Put one entry right before the walk enters it (never following a link); True when it
    carried a privilege bit. Nothing else runs in the workspace while a cycle ends."""
    info, fd, name = found.info, found.folder_fd, found.name
    with contextlib.suppress(OSError):
        if ids is not None and (info.st_uid, info.st_gid) != ids:
            os.chown(name, *ids, dir_fd=fd, follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            return False
        mode = stat.S_IMODE(info.st_mode)
        wanted = mode & ~PRIVILEGE_BITS | (stat.S_IRWXU if stat.S_ISDIR(info.st_mode) else 0)
        if wanted != mode:
            os.chmod(name, wanted, dir_fd=fd)  # not a link (just looked)
        return bool(mode & PRIVILEGE_BITS)
    return False


def privileged_entries(workspace: Path, limit: int) -> tuple[list[str], list[str]]:
    """(entries carrying a setuid, setgid or world-write bit; what this user cannot read), each
    relative to `workspace`, looking at `limit` entries at most (doctor's read-only look)."""
    walk = WorkspaceWalk(workspace, limit)
    carrying = [
        found.path
        for found in itertools.islice(walk, limit)
        if not stat.S_ISLNK(found.info.st_mode) and found.info.st_mode & PRIVILEGE_BITS
    ]
    return carrying, walk.unreadable


# ----------------------------------------------------------------------------------- the walk

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
SHOWN_PATH_CHARS = 200


@dataclass(frozen=True)
class Found:
    """An entry met by a WorkspaceWalk: `name` inside the open folder `folder_fd`, its lstat."""

    folder_fd: int
    name: str
    info: os.stat_result
    parts: tuple[str, ...]

    @property
    def path(self) -> str:
        """Its path relative to the workspace (clipped: a path may be longer than any shown)."""
        return clipped_path(self.parts)


def _identity(info: os.stat_result) -> tuple[int, int]:
    return info.st_dev, info.st_ino


def clipped_path(parts: tuple[str, ...] | list[str]) -> str:
    path = "/".join(parts) or "."
    return path if len(path) <= SHOWN_PATH_CHARS else f"...{path[-SHOWN_PATH_CHARS:]}"


class WorkspaceWalk:
    """Every entry below `root`, in pre-order, never following a link, through one open folder at
    a time: it goes down by descriptor and back up by `..`, so neither a folder 10,000 deep nor a
    path past PATH_MAX stops it, and it holds one descriptor whatever the depth. Where `..` is not
    the folder it came down from (a command moved it while the quota's watch walked), the walk
    stops and says so in `unreadable`: counted as over, never escaping the workspace. A folder
    is entered after its entry is yielded, so the caller may change its modes first. What cannot be listed or looked at is noted in
    `unreadable` (relative paths), never silently passed over. `limit` bounds one folder's listing."""

    def __init__(self, root: Path, limit: int = 10_000_000):
        self.root, self.limit = root, limit
        self.unreadable: list[str] = []

    def __iter__(self) -> Iterator[Found]:
        try:
            fd = os.open(self.root, _DIR_FLAGS)
        except FileNotFoundError:
            return
        except OSError:
            self.unreadable.append(".")
            return
        parts: list[str] = []
        levels = [self._names(fd, parts)]
        ancestors = [_identity(os.fstat(fd))]  # to check that `..` leads back where the walk came from
        try:
            while levels:
                name = next(levels[-1], None)
                if name is None:  # this folder is done: back to its parent
                    levels.pop()
                    ancestors.pop()
                    if levels and (fd := self._climb(fd, parts, ancestors[-1])) < 0:
                        return
                    continue
                info = self._look(fd, name, parts)
                if info is None:
                    continue
                yield Found(fd, name, info, (*parts, name))
                child = self._open(fd, name, parts) if stat.S_ISDIR(info.st_mode) else None
                if child is not None:
                    fd = self._move(child, fd)
                    parts.append(name)
                    levels.append(self._names(fd, parts))
                    ancestors.append(_identity(os.fstat(fd)))
        finally:
            if fd >= 0:
                os.close(fd)

    def _climb(self, fd: int, parts: list[str], expected: tuple[int, int]) -> int:
        """The parent's descriptor in place of `fd`; -1 (fd closed) when it is not the folder the
        walk came down from."""
        fd = self._move(os.open("..", _DIR_FLAGS, dir_fd=fd), fd)
        parts.pop()
        if _identity(os.fstat(fd)) == expected:
            return fd
        os.close(fd)
        self.unreadable.append(f"{clipped_path(parts)} (moved while it was walked)")
        return -1

    def _look(self, fd: int, name: str, parts: list[str]) -> os.stat_result | None:
        try:
            return os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        except OSError:
            self.unreadable.append(clipped_path((*parts, name)))
            return None

    @staticmethod
    def _move(to: int, fd: int) -> int:
        """Hold `to` instead of `fd`."""
        os.close(fd)
        return to

    def _open(self, fd: int, name: str, parts: list[str]) -> int | None:
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError:
            self.unreadable.append(clipped_path((*parts, name)))
            return None

    def _names(self, fd: int, parts: list[str]) -> Iterator[str]:
        try:
            with os.scandir(fd) as entries:
                return iter([entry.name for entry in itertools.islice(entries, self.limit)])
        except OSError:
            self.unreadable.append(clipped_path(parts))
            return iter(())
