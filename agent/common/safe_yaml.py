"""Hardened YAML, and reading the text files it (or a prompt) comes from. A leaf: yaml + stdlib.

`load_yaml` is a safe loader that also refuses duplicate keys, absurd nesting, recursive
aliases and alias bombs; `dump_yaml` writes notes as readable literal blocks. `read_text_file`
reads a file a person may have replaced by anything (a FIFO, a device, a huge file) without
hanging or reading without bound; `open_regular_file` opens one an older release left, never
following a link.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Any, BinaryIO

import yaml

# YAML nested deeper than this is refused before anything is built: a real scratchpad is 3-4
# levels deep, and 100,000 nested brackets crash libyaml's recursive composer (SIGSEGV).
MAX_YAML_DEPTH = 64
# Aliases (*name) may repeat at most this many nodes beyond those written in the file: plenty
# for hand-written anchors, far too few for a "billion laughs" expansion.
MAX_ALIAS_EXPANSION = 100_000


# ---------------------------------------------------------------------------------- text files


class FileRefused(ValueError):
    """A file exists but cannot be used as text: not a regular file, too big, unreadable, not UTF-8."""

    def __init__(self, path: Path, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path, self.problem = path, problem


_FILE_KINDS = {
    stat.S_ISFIFO: "a named pipe (FIFO)",
    stat.S_ISSOCK: "a socket",
    stat.S_ISCHR: "a character device",
    stat.S_ISBLK: "a block device",
}


def _refuse_unless_regular(path: Path, mode: int) -> None:
    if stat.S_ISDIR(mode):
        raise FileRefused(path, "is a directory, not a file")
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _FILE_KINDS.items() if test(mode)), "something else")
        raise FileRefused(path, f"is not a regular file but {kind}")


def open_regular_file(path: Path) -> BinaryIO | None:
    """`path` opened for reading when it is a regular file itself, None when it does not exist.

    For files a person or an older release may have left: a symbolic link is refused, not
    followed (whatever it points to, inside the home or out of it, is never opened), and so is a
    FIFO, a device, a socket or a folder (checked with lstat before opening, then opened with
    O_NOFOLLOW and O_NONBLOCK and checked again, so nothing can hang the reader). Raises
    FileRefused naming the file and what it is."""
    path = Path(path)
    try:
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            raise FileRefused(path, f"is a symbolic link (to {os.readlink(path)}), not a file of its own")
        _refuse_unless_regular(path, info.st_mode)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise FileRefused(path, f"cannot be read: {exc.strerror}") from exc
    handle = os.fdopen(fd, "rb")
    try:
        _refuse_unless_regular(path, os.fstat(fd).st_mode)  # replaced between the check and the open
    except FileRefused:
        handle.close()
        raise
    return handle


def read_text_file(path: Path, what: str, limit: int) -> str | None:
    """The UTF-8 text of the regular file `path` (a symlink is followed), None when it does not exist.

    Anything else is refused with a FileRefused naming the file and the problem, `what` (e.g.
    "scratchpad") naming the file's role in the size message: a directory, a FIFO or device
    (checked before opening, opened non-blocking and checked again, so nothing can hang the
    reader), a file over `limit` bytes (never more than that is read, even if it grows), a file
    that cannot be read or is not UTF-8.
    """
    path = Path(path)
    try:
        _refuse_unless_regular(path, os.stat(path).st_mode)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise FileRefused(path, f"cannot be read: {exc.strerror}") from exc
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        _refuse_unless_regular(path, info.st_mode)  # replaced between the check and the open
        if info.st_size > limit:
            raise FileRefused(path, f"is {info.st_size:,} bytes, over the {limit:,}-byte limit for a {what}")
        try:
            raw = handle.read(limit + 1)
        except OSError as exc:
            raise FileRefused(path, f"cannot be read: {exc.strerror}") from exc
    if len(raw) > limit:
        raise FileRefused(path, f"is over the {limit:,}-byte limit for a {what}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileRefused(
            path, f"is not UTF-8 text (byte {exc.start} is {raw[exc.start]:#04x}); is it binary?"
        ) from exc


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
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r}",
                    key_node.start_mark,
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


class _ShapeWalk:
    """One walk over a YAML event stream: the open collections, each as [anchor, expanded node
    count], the anchors' expanded sizes, and how many nodes the file itself writes."""

    def __init__(self) -> None:
        self.frames: list[list] = []
        self.anchored: dict[str, int] = {}
        self.written = 0

    def step(self, event: yaml.Event) -> None:
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            self._open(event)
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            self._close()
        elif isinstance(event, yaml.ScalarEvent):
            self._add(self._scalar(event), event)
        elif isinstance(event, yaml.AliasEvent):
            self._add(self._alias(event), event)

    def _open(self, event: yaml.CollectionStartEvent) -> None:
        self.written += 1
        if len(self.frames) >= MAX_YAML_DEPTH:
            raise YAMLShapeError(f"nested more than {MAX_YAML_DEPTH} levels deep", event.start_mark)
        self.frames.append([event.anchor, 1])

    def _close(self) -> None:
        anchor, size = self.frames.pop()
        if anchor is not None:
            self.anchored[anchor] = size
        if self.frames:
            self.frames[-1][1] += size

    def _scalar(self, event: yaml.ScalarEvent) -> int:
        self.written += 1
        if event.anchor is not None:
            self.anchored[event.anchor] = 1
        return 1

    def _alias(self, event: yaml.AliasEvent) -> int:
        if any(anchor == event.anchor for anchor, _ in self.frames):
            raise YAMLShapeError(
                f"alias *{event.anchor} is inside its own anchor (recursive structures are not allowed)",
                event.start_mark,
            )
        return self.anchored.get(event.anchor, 1)  # an undefined alias is reported by the loader

    def _add(self, size: int, event: yaml.Event) -> None:
        if not self.frames:
            return
        self.frames[-1][1] += size
        if self.frames[-1][1] > self.written + MAX_ALIAS_EXPANSION:
            raise YAMLShapeError(
                f"aliases expand to over {MAX_ALIAS_EXPANSION:,} more values than the file holds (an alias bomb?)",
                event.start_mark,
            )


def _check_shape(text: str) -> None:
    """Walk the YAML event stream (iterative, nothing built) and refuse hostile shapes.

    libyaml's composer and the constructors recurse once per level, so 100,000 nested brackets
    crash the interpreter; aliases are shared when built, but anything that walks the result
    (redaction, JSON, the prompt) expands them, so a "billion laughs" file must never load.
    """
    loader = _StrictSafeLoader(text)
    try:
        walk = _ShapeWalk()
        while loader.check_event():
            walk.step(loader.get_event())
    except yaml.MarkedYAMLError as exc:
        # PyYAML 6.0.4's scanner refuses deep flow nesting itself, reading ahead of the events this
        # walk sees: the same refusal, said the same way whichever version is installed
        if "maximum nesting depth" not in str(exc.problem):
            raise
        raise YAMLShapeError(f"nested more than {MAX_YAML_DEPTH} levels deep", exc.problem_mark) from None
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


def yaml_problem(exc: yaml.YAMLError) -> str:
    """One line for a person: 'invalid YAML at line L, column C: what is wrong'."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    context = getattr(exc, "context", None)
    if "could not determine a constructor" in problem:
        problem = "YAML tags that build objects are not allowed (" + problem.split("tag ", 1)[-1] + ")"
    elif context:  # "while parsing a flow sequence", "expected a single document in the stream"
        problem = f"{context}, {problem}"
    return f"invalid YAML{where}: {' '.join(problem.split())}"
