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
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import yaml

from . import schema
from .outcomes import Busy, DiskError, InvalidScratchpad

# A scratchpad this large is not memory, it is an accident; refuse it rather than feed it to a model.
MAX_SCRATCHPAD_BYTES = 4 * 1024 * 1024
# YAML nested deeper than this is refused before anything is built: a real scratchpad is 3-4
# levels deep, and 100,000 nested brackets crash libyaml's recursive composer (SIGSEGV).
MAX_YAML_DEPTH = 64
# Aliases (*name) may repeat at most this many nodes beyond those written in the file: plenty
# for hand-written anchors, far too few for a "billion laughs" expansion.
MAX_ALIAS_EXPANSION = 100_000
# How long a lock must stay taken before a cycle reports busy, when no --wait was asked for.
BUSY_GRACE_SECONDS = 0.1
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

    @property
    def archive(self) -> Path:
        return self.logs / "archive.jsonl"

    def snapshot(self, cycle_id: str, label: str) -> Path:
        return self.scratchpad / f"{cycle_id}_{label}.yaml"

    def cycle_log(self, cycle_id: str) -> Path:
        return self.logs / f"cycle_{cycle_id}.log"

    def ensure_dirs(self) -> None:
        """Create scratchpad/ and logs/ private to the owner (they may hold tool output).

        A folder that already exists with wider permissions is narrowed to 0700 when we own it.
        """
        for folder in (self.scratchpad, self.logs):
            try:
                folder.mkdir(mode=SECRET_DIR_MODE, parents=True, exist_ok=True)
            except OSError as exc:
                raise disk_error(folder, exc) from exc
            with contextlib.suppress(OSError):
                info = folder.stat()
                if info.st_mode & 0o077 and info.st_uid == os.geteuid():
                    folder.chmod(SECRET_DIR_MODE)


def disk_error(path: Path, exc: OSError) -> DiskError:
    reason = exc.strerror or str(exc)
    hint = {
        errno.ENOSPC: " (the disk is full)",
        errno.EROFS: " (the file system is read-only)",
        errno.EACCES: " (permission denied)",
        errno.EDQUOT: " (disk quota exceeded)",
    }.get(exc.errno, "")
    return DiskError(f"could not write {path}: {reason}{hint}")


# Fault injection for tests/test_durability.py, inert unless AGENT_TEST_KILL_AT is set: with
# AGENT_TEST_KILL_AT=N the process SIGKILLs itself at the N-th fault point it passes (the lock
# and each write step below), so a test can prove that a kill at every step loses nothing.
_KILL_AT = os.environ.get("AGENT_TEST_KILL_AT", "")
_fault_points_passed = 0


def _fault_point(step: str) -> None:
    global _fault_points_passed
    if _KILL_AT:
        _fault_points_passed += 1
        if str(_fault_points_passed) == _KILL_AT:
            os.write(2, f"AGENT_TEST_KILL_AT: killed at {step}\n".encode())
            os.kill(os.getpid(), signal.SIGKILL)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so that a crash leaves either the old or the new file whole."""
    tmp = path.parent / f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    created = False
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, SECRET_FILE_MODE)
        created = True
        _fault_point(f"{path.name}: temporary file created")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            _fault_point(f"{path.name}: temporary file written")
            os.fsync(handle.fileno())
        _fault_point(f"{path.name}: temporary file synced")
        os.replace(tmp, path)
        created = False
        _fault_point(f"{path.name}: renamed")
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        _fault_point(f"{path.name}: folder synced")
    except OSError as exc:
        raise disk_error(path, exc) from exc
    finally:
        if created:
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


# libyaml's C parser and emitter when present (several times faster, same results); the Python
# ones otherwise. Both are the *safe* variants: no tag can build an arbitrary object.
_SafeLoaderBase = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_SafeDumperBase = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _StrictSafeLoader(_SafeLoaderBase):
    """A safe loader that refuses duplicate mapping keys instead of keeping the last one."""


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


class _ReadableDumper(_SafeDumperBase):
    """A safe dumper that writes multi-line strings (notes) as literal blocks."""


def _represent_str(dumper: _SafeDumperBase, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_ReadableDumper.add_representer(str, _represent_str)


class YAMLShapeError(yaml.YAMLError):
    """YAML refused for its shape (too deep, recursive, an alias bomb) before anything is built."""

    def __init__(self, problem: str, mark=None):
        super().__init__(problem)
        self.problem, self.problem_mark = problem, mark


def _check_shape(text: str) -> None:
    """Walk the YAML event stream (iterative, nothing built) and refuse hostile shapes.

    libyaml's composer and the constructors recurse once per level, so 100,000 nested brackets
    crash the interpreter; aliases are shared when built, but anything that walks the result
    (redaction, JSON, the prompt) expands them, so a "billion laughs" file must never load.
    """
    loader = _StrictSafeLoader(text)
    try:
        frames: list[list] = []  # one [anchor, expanded node count] per open collection
        anchored: dict[str, int] = {}  # anchor -> its expanded node count
        written = 0
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                written += 1
                if len(frames) >= MAX_YAML_DEPTH:
                    raise YAMLShapeError(f"nested more than {MAX_YAML_DEPTH} levels deep", event.start_mark)
                frames.append([event.anchor, 1])
            elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                anchor, size = frames.pop()
                if anchor is not None:
                    anchored[anchor] = size
                if frames:
                    frames[-1][1] += size
            elif isinstance(event, (yaml.ScalarEvent, yaml.AliasEvent)):
                if isinstance(event, yaml.ScalarEvent):
                    written += 1
                    size = 1
                    if event.anchor is not None:
                        anchored[event.anchor] = 1
                elif any(anchor == event.anchor for anchor, _ in frames):
                    raise YAMLShapeError(f"alias *{event.anchor} is inside its own anchor (recursive structures "
                                         "are not allowed)", event.start_mark)
                else:
                    size = anchored.get(event.anchor, 1)  # an undefined alias is reported by the loader
                if frames:
                    frames[-1][1] += size
                    if frames[-1][1] > written + MAX_ALIAS_EXPANSION:
                        raise YAMLShapeError(f"aliases expand to over {MAX_ALIAS_EXPANSION:,} more values than the "
                                             "file holds (an alias bomb?)", event.start_mark)
    finally:
        loader.dispose()


def load_yaml(text: str) -> Any:
    """Parse YAML with the safe loader: no tags that build objects, no duplicate keys, nothing
    nested absurdly deep, no recursive aliases, no alias bombs. Every refusal is a YAMLError."""
    _check_shape(text)
    try:
        return yaml.load(text, Loader=_StrictSafeLoader)  # noqa: S506 - a SafeLoader subclass
    except RecursionError:  # not expected within MAX_YAML_DEPTH; never let it escape as a crash
        raise YAMLShapeError("nested too deeply") from None
    except (ValueError, OverflowError) as exc:  # a value YAML cannot build: a date like 2024-02-30
        raise YAMLShapeError(f"a value cannot be read: {exc}") from None


def dump_yaml(data: Any) -> str:
    return yaml.dump(data, Dumper=_ReadableDumper, sort_keys=False, allow_unicode=True, width=100)


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    context = getattr(exc, "context", None)
    if "could not determine a constructor" in problem:
        problem = "YAML tags that build objects are not allowed (" + problem.split("tag ", 1)[-1] + ")"
    elif context:  # "while parsing a flow sequence", "expected a single document in the stream"
        problem = f"{context}, {problem}"
    return f"invalid YAML{where}: {' '.join(problem.split())}"


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
        try:
            target = Path(path).resolve()
        except (OSError, RuntimeError) as exc:  # a symlink loop
            raise invalid(f"is a symlink that cannot be resolved ({exc})") from exc
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
        with open(path, "rb") as handle:  # never more than the limit, even if it grew meanwhile
            raw = handle.read(MAX_SCRATCHPAD_BYTES + 1)
    except OSError as exc:
        raise invalid(f"cannot be read: {exc.strerror}") from exc
    if len(raw) > MAX_SCRATCHPAD_BYTES:
        raise invalid(f"is over the {MAX_SCRATCHPAD_BYTES:,}-byte limit for a scratchpad")
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
    if not taken:
        return base
    # never reuse the bare id once the second has others, even if retention deleted it
    suffixes = [int(t[len(base) + 1:]) for t in taken if t != base and t[len(base) + 1:].isdigit()]
    following = max(suffixes, default=1) + 1
    if following > 99:  # "_100" would sort before "_99": take the next second instead
        return new_cycle_id(home, now + _dt.timedelta(seconds=1))
    return f"{base}_{following:02d}"


# ---------------------------------------------------------------------------------- cycle index


def append_jsonl(path: Path, records: list[dict]) -> None:
    """Append records as JSON lines with one write, then fsync (readers skip a torn tail)."""
    if not records:
        return
    data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, SECRET_FILE_MODE)
        try:
            _fault_point(f"{path.name}: before append")
            os.write(fd, data)
            os.fsync(fd)
            _fault_point(f"{path.name}: appended")
        finally:
            os.close(fd)
    except OSError as exc:
        raise disk_error(path, exc) from exc


def read_jsonl(path: Path, required_key: str) -> list[dict]:
    """Every whole record (a JSON object with `required_key`) in a JSON-lines file, oldest first.

    A torn last line (a crash mid-append) or a foreign line is skipped."""
    try:
        lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return []
    records = []
    for line in lines:
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if isinstance(record, dict) and required_key in record:
                records.append(record)
    return records


def append_index(home: Home, record: dict) -> None:
    """Add one cycle's record to logs/index.jsonl."""
    append_jsonl(home.index, [record])


def read_index(home: Home) -> list[dict]:
    """Every cycle record in the index, oldest first (records with a malformed id are skipped)."""
    return [r for r in read_jsonl(home.index, "cycle_id") if isinstance(r["cycle_id"], str)]


# ------------------------------------------------------------------------------------- the lock


@contextlib.contextmanager
def home_lock(home: Home, wait: float = 0) -> Iterator[None]:
    """Hold the home's lock or raise Busy.

    A kernel flock on .agent.lock: released by the kernel when the process dies, even on kill -9,
    so a crashed cycle never leaves the home blocked. The file is never unlinked (unlinking a
    flocked file lets two processes lock two different inodes). The descriptor is not inherited
    by child processes, so a tool's leftover child cannot keep the home locked.
    (Not the filelock package: importing it costs more than the rest of a cycle's start-up.)
    """
    import fcntl
    import time

    try:
        fd = os.open(home.lock_file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, SECRET_FILE_MODE)
    except OSError as exc:
        raise disk_error(home.lock_file, exc) from exc
    # Even with no wait asked for, a lock held only for an instant (`agent status` or `doctor`
    # checking it) must not make a cron cycle skip: a real cycle holds it for seconds.
    deadline = time.monotonic() + max(wait, BUSY_GRACE_SECONDS)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    waited = f" after waiting {wait:g}s" if wait else ""
                    raise Busy(f"another agent process holds the lock on {home.root}{waited}; "
                               "try again later") from None
                time.sleep(min(0.01 if wait == 0 else 0.05, max(0.0, deadline - time.monotonic())))
        _fault_point("lock taken")
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock


def is_locked(home: Home) -> bool:
    """Whether some process holds the home's lock right now (takes and drops it if free)."""
    if not home.lock_file.exists():
        return False
    try:
        with home_lock(home):
            return False
    except Busy:
        return True
