"""The scratchpad's files (active.yaml and the snapshot pairs: files, as seed 004 and people expect,
never rows of the database): read and validate one, write one, and refuse to write a state that
reading would refuse."""

from __future__ import annotations

import hashlib
from pathlib import Path

import yaml

from agent.common.files import atomic_write
from agent.common.outcomes import InvalidScratchpad
from agent.common.safe_yaml import FileRefused, dump_yaml, load_yaml, read_text_file, yaml_problem
from agent.state import fresh_state, normalize, problems
from agent.store.home import Home

# A scratchpad this large is not memory, it is an accident; refuse it rather than feed it to a model.
MAX_SCRATCHPAD_BYTES = 4 * 1024 * 1024


class StateTooLarge(InvalidScratchpad):
    """A state was not written because it would be over MAX_SCRATCHPAD_BYTES (and so unreadable)."""


def read_state_file(path: Path, home_root: Path) -> dict | None:
    """Read and validate a scratchpad file. None when it does not exist; InvalidScratchpad when
    it exists but cannot be used (the message names the file and the problem)."""
    _refuse_a_symlink_out_of_the_home(path, home_root)
    try:
        text = read_text_file(path, "scratchpad", MAX_SCRATCHPAD_BYTES)
    except FileRefused as exc:
        raise _invalid(path, exc.problem) from exc
    if text is None:
        return None
    state = normalize(_mapping_in(path, text))
    found = problems(state)
    if found:
        raise _invalid(path, "; ".join(found))
    return state


def _invalid(path: Path, problem: str) -> InvalidScratchpad:
    return InvalidScratchpad(f"{path}: {problem}")


def _refuse_a_symlink_out_of_the_home(path: Path, home_root: Path) -> None:
    """A scratchpad may be a symlink only to an existing file inside the home."""
    if not Path(path).is_symlink():
        return
    try:
        target = Path(path).resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise _invalid(path, f"is a symlink that cannot be resolved ({exc})") from exc
    if not target.is_relative_to(home_root.resolve()):
        raise _invalid(path, f"is a symlink to {target}, outside the home {home_root}; refusing to follow it")
    if not target.exists():
        raise _invalid(path, f"is a symlink to {target}, which does not exist")


def _mapping_in(path: Path, text: str) -> dict:
    """The YAML mapping a scratchpad file holds; InvalidScratchpad when it is empty, not YAML or not a mapping."""
    if not text.strip():
        raise _invalid(path, "is empty; run `agent reset` to start from a template, or delete the file")
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        raise _invalid(path, yaml_problem(exc)) from exc
    except RecursionError as exc:
        raise _invalid(path, "invalid YAML: nested too deeply") from exc
    if not isinstance(data, dict):
        raise _invalid(path, problems(data)[0])
    return data


def load_state(home: Home) -> dict:
    """Wake: the state in active.yaml, or a fresh default state when there is none."""
    state = read_state_file(home.active, home.root)
    return fresh_state() if state is None else state


def _size_problem(size: int) -> str | None:
    if size <= MAX_SCRATCHPAD_BYTES:
        return None
    return f"the scratchpad would be {size:,} bytes, over the {MAX_SCRATCHPAD_BYTES:,}-byte limit"


def state_size_problem(state: dict) -> str | None:
    """Why `state` cannot be saved for its size (it could not be read back), or None when it fits.

    Ask before saving a state that a reply changed: over the cap, keep the state as read."""
    return _size_problem(len(dump_yaml(state).encode("utf-8")))


def write_state(path: Path, state: dict) -> str:
    """Replace the scratchpad file `path` with `state`; StateTooLarge (nothing written) when it
    would be over the size read_state_file accepts. The sha256 of the bytes written (`file_digest`)."""
    data = dump_yaml(state).encode("utf-8")
    problem = _size_problem(len(data))
    if problem:
        raise StateTooLarge(f"{path}: not written: {problem}")
    atomic_write(path, data)
    return hashlib.sha256(data).hexdigest()


def file_digest(path: Path) -> str | None:
    """The sha256 of a scratchpad file's bytes as they are now (None: there is none): what tells a
    held home that its memory changed (agent/gates/holds.py)."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None
