"""Scratchpad files: read and validate one (active.yaml or a snapshot), write one."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from .. import schema
from ..outcomes import InvalidScratchpad
from ..safe_yaml import dump_yaml, load_yaml, yaml_problem
from .files import atomic_write
from .home import Home

# A scratchpad this large is not memory, it is an accident; refuse it rather than feed it to a model.
MAX_SCRATCHPAD_BYTES = 4 * 1024 * 1024


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
        raise invalid(yaml_problem(exc)) from exc
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
