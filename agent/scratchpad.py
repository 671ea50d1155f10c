"""File I/O for a home: atomic writes, safe YAML, snapshots, cycle ids, the index, the lock.

Every write goes through `atomic_write` (temporary file in the same folder, fsync, rename,
fsync of the folder), so a crash leaves each file whole-old or whole-new. Every YAML read goes
through `load_yaml` (a safe loader that also refuses duplicate keys).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import yaml

from . import schema
from .outcomes import Busy, DiskError, InvalidScratchpad

# A scratchpad this large is not memory, it is an accident; refuse it rather than feed it to a model.
MAX_SCRATCHPAD_BYTES = 4 * 1024 * 1024
SECRET_DIR_MODE = 0o700
SECRET_FILE_MODE = 0o600


@dataclass(frozen=True)
class Home:
    """A working directory for one agent: scratchpad/, logs/, rules.md, optional config.yaml."""

    root: Path

    @classmethod
    def at(cls, path: str | os.PathLike) -> "Home":
        return cls(Path(path).expanduser().absolute())

    @property
    def scratchpad(self) -> Path:
        return self.root / "scratchpad"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def active(self) -> Path:
        return self.scratchpad / "active.yaml"

    @property
    def rules(self) -> Path:
        return self.root / "rules.md"

    @property
    def config(self) -> Path:
        return self.root / "config.yaml"

    @property
    def templates(self) -> Path:
        return self.root / "templates"

    @property
    def lock_file(self) -> Path:
        return self.root / ".agent.lock"

    @property
    def index(self) -> Path:
        return self.logs / "index.jsonl"

    def snapshot(self, cycle_id: str, label: str) -> Path:
        return self.scratchpad / f"{cycle_id}_{label}.yaml"

    def cycle_log(self, cycle_id: str) -> Path:
        return self.logs / f"cycle_{cycle_id}.log"

    def ensure_dirs(self) -> None:
        """Create scratchpad/ and logs/ private to the owner (they may hold tool output)."""
        for folder in (self.scratchpad, self.logs):
            try:
                folder.mkdir(mode=SECRET_DIR_MODE, parents=True, exist_ok=True)
            except OSError as exc:
                raise disk_error(folder, exc) from exc


def disk_error(path: Path, exc: OSError) -> DiskError:
    reason = exc.strerror or str(exc)
    hint = {
        errno.ENOSPC: " (the disk is full)",
        errno.EROFS: " (the file system is read-only)",
        errno.EACCES: " (permission denied)",
        errno.EDQUOT: " (disk quota exceeded)",
    }.get(exc.errno, "")
    return DiskError(f"could not write {path}: {reason}{hint}")


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so that a crash leaves either the old or the new file whole."""
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        tmp = None
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as exc:
        raise disk_error(path, exc) from exc
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def remove_stale_temporaries(home: Home) -> list[Path]:
    """Delete temporary files a killed process left behind. Call only while holding the lock."""
    removed = []
    for folder in (home.scratchpad, home.logs):
        for leftover in folder.glob(".*.tmp"):
            with contextlib.suppress(OSError):
                leftover.unlink()
                removed.append(leftover)
    return removed


# ---------------------------------------------------------------------------------------- YAML


class _StrictSafeLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses duplicate mapping keys instead of keeping the last one."""


def _construct_mapping_once(loader: _StrictSafeLoader, node: yaml.MappingNode) -> dict:
    loader.flatten_mapping(node)
    seen: set = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        with contextlib.suppress(TypeError):  # unhashable keys are refused by construct_mapping
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"found duplicate key {key!r}", key_node.start_mark,
                )
            seen.add(key)
    return loader.construct_mapping(node, deep=True)


_StrictSafeLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping_once)


class _ReadableDumper(yaml.SafeDumper):
    """yaml.SafeDumper that writes multi-line strings (notes) as literal blocks."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_ReadableDumper.add_representer(str, _represent_str)


def load_yaml(text: str) -> Any:
    """Parse YAML with the safe loader: no tags that build objects, no duplicate keys."""
    return yaml.load(text, Loader=_StrictSafeLoader)  # noqa: S506 - a SafeLoader subclass


def dump_yaml(data: Any) -> str:
    return yaml.dump(data, Dumper=_ReadableDumper, sort_keys=False, allow_unicode=True, width=100)


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    if "could not determine a constructor" in problem:
        problem = "YAML tags that build objects are not allowed (" + problem.split("tag ", 1)[-1] + ")"
    return f"invalid YAML{where}: {problem}"


def read_state_file(path: Path, home_root: Path) -> dict | None:
    """Read and validate a scratchpad file. None when it does not exist; InvalidScratchpad when
    it exists but cannot be used (the message names the file and the problem)."""

    def invalid(problem: str) -> InvalidScratchpad:
        return InvalidScratchpad(f"{path}: {problem}")

    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise invalid(f"cannot be read: {exc.strerror}") from exc
    if Path(path).is_symlink():
        target = Path(path).resolve()
        if not target.is_relative_to(home_root.resolve()):
            raise invalid(f"is a symlink to {target}, outside the home {home_root}; refusing to follow it")
        if not target.exists():
            raise invalid(f"is a symlink to {target}, which does not exist")
        info = os.stat(target)
    if Path(path).is_dir():
        raise invalid("is a directory, not a file")
    if not Path(path).is_file():
        raise invalid("is not a regular file")
    if info.st_size > MAX_SCRATCHPAD_BYTES:
        raise invalid(f"is {info.st_size:,} bytes, over the {MAX_SCRATCHPAD_BYTES:,}-byte limit for a scratchpad")
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise invalid(f"cannot be read: {exc.strerror}") from exc
    if not raw.strip():
        raise invalid("is empty; run `agent reset` to start from a template, or delete the file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise invalid(f"is not UTF-8 text (byte {exc.start} is {raw[exc.start]:#04x}); is it binary?") from exc
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        raise invalid(_yaml_problem(exc)) from exc
    except RecursionError as exc:
        raise invalid("invalid YAML: nested too deeply") from exc
    if not isinstance(data, dict):
        raise invalid(schema.problems(data)[0])
    state = schema.normalize(data)
    found = schema.problems(state)
    if found:
        raise invalid("; ".join(found))
    return state


def load_state(home: Home) -> dict:
    """Wake: the state in active.yaml, or a fresh default state when there is none."""
    state = read_state_file(home.active, home.root)
    return schema.fresh_state() if state is None else state


def write_state(path: Path, state: dict) -> None:
    atomic_write(path, dump_yaml(state).encode("utf-8"))


# ------------------------------------------------------------------------------------ cycle ids


def new_cycle_id(home: Home, now: _dt.datetime) -> str:
    """`YYYYMMDD_HHMMSS` (UTC), or with `_NN` appended when that second is already taken.

    Ids sort in time order as strings; UTC keeps that true across daylight-saving changes.
    Call while holding the lock so two processes cannot choose the same id.
    """
    base = now.astimezone(_dt.timezone.utc).strftime("%Y%m%d_%H%M%S")
    taken = {p.name[: -len("_before.yaml")] for p in home.scratchpad.glob(f"{base}*_before.yaml")}
    taken |= {p.stem[len("cycle_"):] for p in home.logs.glob(f"cycle_{base}*.log")}
    if base not in taken:
        return base
    suffixes = [int(t[len(base) + 1:]) for t in taken if t != base and t[len(base) + 1:].isdigit()]
    return f"{base}_{max(suffixes, default=1) + 1:02d}"


# ---------------------------------------------------------------------------------- cycle index


def append_index(home: Home, record: dict) -> None:
    """Append one JSON line to logs/index.jsonl with a single write (readers skip a torn tail)."""
    line = (json.dumps(record, ensure_ascii=False, sort_keys=False) + "\n").encode("utf-8")
    try:
        fd = os.open(home.index, os.O_WRONLY | os.O_APPEND | os.O_CREAT, SECRET_FILE_MODE)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise disk_error(home.index, exc) from exc


def read_index(home: Home) -> list[dict]:
    """Every whole record in the cycle index, oldest first. A torn or foreign line is skipped."""
    try:
        lines = home.index.read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return []
    records = []
    for line in lines:
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if isinstance(record, dict) and "cycle_id" in record:
                records.append(record)
    return records


# ------------------------------------------------------------------------------------- the lock


@contextlib.contextmanager
def home_lock(home: Home, wait: float = 0) -> Iterator[None]:
    """Hold the home's lock (a kernel flock, released even on kill -9) or raise Busy."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(home.lock_file), timeout=wait, mode=SECRET_FILE_MODE)
    try:
        lock.acquire()
    except Timeout as exc:
        waited = f" after waiting {wait:g}s" if wait else ""
        raise Busy(f"another agent process holds the lock on {home.root}{waited}; try again later") from exc
    except OSError as exc:
        raise disk_error(home.lock_file, exc) from exc
    try:
        yield
    finally:
        lock.release()


def is_locked(home: Home) -> bool:
    """Whether some process holds the home's lock right now (takes and drops it if free)."""
    if not home.lock_file.exists():
        return False
    try:
        with home_lock(home):
            return False
    except Busy:
        return True
