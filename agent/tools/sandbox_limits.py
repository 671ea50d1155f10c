"""The sandbox's resource limits: memory, processes and file size, enforced by the kernel.

Two mechanisms, because neither is enough alone:
- a cgroup per command (pids.max, and memory.max / memory.limit_in_bytes) where this process
  may create one under its own cgroup (cgroup v2 with the controllers delegated, or a writable
  v1 hierarchy, as root usually has). It bounds the sandbox as a whole, whatever its uid.
- rlimits: RLIMIT_FSIZE (file size) and RLIMIT_CORE (no core files) always; RLIMIT_AS
  (memory per process) when no memory cgroup is in force; RLIMIT_NPROC (processes), set inside
  the sandbox by the first shell so that it counts only the sandbox's processes. The kernel never
  applies RLIMIT_NPROC to root's user, which is why a root agent's sandbox runs as `sandbox_uid`
  (sandbox_identity.py): it always applies there.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import resource
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
CGROUP_PREFIX = "agent-sandbox."
_counter = itertools.count()


@dataclass(frozen=True)
class ResourceLimits:
    memory_bytes: int
    processes: int
    file_bytes: int


def _own_cgroup_folders() -> dict[str, Path]:
    """controller ("pids", "memory") -> the folder of this process's cgroup that can hold a child
    with that controller's limit files."""
    found: dict[str, Path] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        relative = path.lstrip("/")
        if hierarchy == "0":  # cgroup v2: the controllers must be enabled for our children
            base = CGROUP_ROOT if (CGROUP_ROOT / "cgroup.controllers").exists() else CGROUP_ROOT / "unified"
            folder = base / relative
            try:
                enabled = (folder / "cgroup.subtree_control").read_text().split()
            except OSError:
                continue
            for name in ("pids", "memory"):
                if name in enabled:
                    found.setdefault(name, folder)
        else:
            for name in controllers.split(","):
                if name in ("pids", "memory"):
                    found.setdefault(name, CGROUP_ROOT / name / relative)
    return found


def _write(path: Path, value: str) -> bool:
    try:
        path.write_text(value)
        return True
    except OSError:
        return False


@dataclass
class CommandCgroup:
    """The cgroups one sandboxed command runs in (none when this process may not create any)."""

    folders: list[Path] = field(default_factory=list)
    bounds_processes: bool = False
    bounds_memory: bool = False

    @classmethod
    def create(cls, limits: ResourceLimits) -> CommandCgroup:
        made = cls()
        name = f"{CGROUP_PREFIX}{os.getpid()}.{next(_counter)}"
        for controller, parent in _own_cgroup_folders().items():
            _remove_stale(parent)
            folder = parent / name
            try:
                folder.mkdir()
            except OSError:
                continue
            if controller == "pids":
                ok = _write(folder / "pids.max", str(limits.processes))
                made.bounds_processes |= ok
            elif (folder / "memory.max").exists():  # v2
                ok = _write(folder / "memory.max", str(limits.memory_bytes))
                _write(folder / "memory.swap.max", "0")
                made.bounds_memory |= ok
            else:  # v1
                ok = _write(folder / "memory.limit_in_bytes", str(limits.memory_bytes))
                _write(folder / "memory.memsw.limit_in_bytes", str(limits.memory_bytes))
                made.bounds_memory |= ok
            made.folders.append(folder)
            if not ok:
                made.remove()
                return cls()
        return made

    def join(self) -> None:
        """In the child before exec: move this process (and so all it starts) into the cgroups."""
        pid = str(os.getpid()).encode()
        for folder in self.folders:
            fd = os.open(folder / "cgroup.procs", os.O_WRONLY)
            try:
                os.write(fd, pid)
            finally:
                os.close(fd)

    def remove(self) -> None:
        """Once the command's processes are gone: remove the cgroups. The kernel may take a moment
        to let go of exited processes; one still busy after a second is left for the next
        command's clean-up (`_remove_stale`)."""
        deadline = time.monotonic() + 1.0
        for folder in self.folders:
            while True:
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.01)
        self.folders = []


def _remove_stale(parent: Path) -> None:
    """Kill what is left in the cgroups of agents that are gone, and remove them. An agent killed
    while bwrap was setting up can leave bwrap waiting forever (bwrap's own credential changes
    clear the parent-death signal); its cgroup names it. A live agent's cgroups are never touched."""
    with contextlib.suppress(OSError), os.scandir(parent) as entries:
        for entry in itertools.islice(entries, 10_000):
            owner = entry.name[len(CGROUP_PREFIX) :].partition(".")[0]
            if entry.name.startswith(CGROUP_PREFIX) and owner.isdigit() and not Path(f"/proc/{owner}").exists():
                with contextlib.suppress(OSError):
                    for pid in Path(entry.path, "cgroup.procs").read_text().split()[:10_000]:
                        with contextlib.suppress(OSError):
                            os.kill(int(pid), signal.SIGKILL)
                with contextlib.suppress(OSError):
                    os.rmdir(entry.path)  # busy while the killed ones are reaped: the next command retries


def set_rlimits(limits: ResourceLimits, memory_by_cgroup: bool) -> None:
    """In the child before exec: the per-process limits (inherited by everything it starts)."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if not memory_by_cgroup:
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))


def nproc_prefix(limits: ResourceLimits) -> str:
    """Shell text that sets RLIMIT_NPROC inside the sandbox (dash spells it -p, bash -u) or fails."""
    n = limits.processes
    return f"ulimit -p {n} 2>/dev/null || ulimit -u {n} 2>/dev/null || exit 126"
