"""Walking, copying and removing a tree the model may have shaped: iterative and bounded.

The model's shell can build a folder 1,200 levels deep or a path longer than PATH_MAX. Python's
recursive helpers (`os.walk` before 3.12, `shutil.copytree`, `shutil.rmtree`) then raise
RecursionError, and path-based calls raise ENAMETOOLONG. Here every walk keeps its own stack,
opens each folder relative to its parent's descriptor (so no path is ever longer than one name),
never follows a symlink, stops below `max_depth` folders and after `max_entries` entries, and
counts what it left out instead of raising. A copy leaves a file's holes as holes, so it takes no
more disk than the original (the quota counts blocks: a long, empty file costs the model nothing).
Every walk or copy of a workspace goes through here: the after-crash sweep (`common/files.py`),
`agent replay`'s scratch copy and its removal.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

MAX_DEPTH = 128  # folders below the root a walk enters; deeper ones are counted, not entered
MAX_ENTRIES = 200_000  # entries a walk visits in all before it stops
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True)
class Entry:
    """One entry met by a walk: its name inside the open folder `folder_fd`, and its relative path."""

    folder_fd: int
    name: str
    parts: tuple[str, ...]
    mode: int  # lstat's st_mode: a symlink is a symlink

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)

    @property
    def is_file(self) -> bool:
        return stat.S_ISREG(self.mode)

    @property
    def is_symlink(self) -> bool:
        return stat.S_ISLNK(self.mode)


class Walk:
    """An iterative walk below `root` (pre-order, symlinks never followed). After iterating,
    `left_out` counts folders too deep or unreadable and entries past the cap (0: all seen)."""

    def __init__(self, root: Path, max_depth: int = MAX_DEPTH, max_entries: int = MAX_ENTRIES):
        self.root, self.max_depth, self.max_entries = Path(root), max_depth, max_entries
        self.too_deep = self.unreadable = self.seen = 0
        self.failed = 0  # entries a copy could not make
        self.cut = False

    @property
    def left_out(self) -> int:
        return self.too_deep + self.unreadable + self.failed + int(self.cut)

    def describe(self) -> str:
        """What the walk left out, in words ("" when nothing)."""
        parts = [f"{self.too_deep} folder(s) deeper than {self.max_depth} levels"] if self.too_deep else []
        parts += [f"{self.unreadable} unreadable folder(s)"] if self.unreadable else []
        parts += [f"{self.failed} entries that could not be copied"] if self.failed else []
        parts += [f"everything after the first {self.max_entries} entries"] if self.cut else []
        return ", ".join(parts)

    def __iter__(self) -> Iterator[Entry]:
        try:
            root_fd = os.open(self.root, _DIR_FLAGS)
        except OSError:
            self.unreadable += 1
            return
        stack = [(root_fd, (), self._list(root_fd))]
        try:
            while stack:
                fd, parts, names = stack[-1]
                name = next(names, None)
                if name is None:
                    os.close(stack.pop()[0])
                    continue
                if self.seen >= self.max_entries:
                    self.cut = True
                    return
                self.seen += 1
                try:
                    mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
                except OSError:
                    continue  # gone since it was listed
                entry = Entry(fd, name, (*parts, name), mode)
                yield entry
                if entry.is_dir:
                    child = self._enter(entry)
                    if child is not None:
                        stack.append((child, entry.parts, self._list(child)))
        finally:
            for fd, _parts, _names in stack:
                os.close(fd)

    def _enter(self, entry: Entry) -> int | None:
        if len(entry.parts) >= self.max_depth:
            self.too_deep += 1
            return None
        try:
            return os.open(entry.name, _DIR_FLAGS, dir_fd=entry.folder_fd)
        except OSError:
            self.unreadable += 1
            return None

    def _list(self, fd: int) -> Iterator[str]:
        try:
            with os.scandir(fd) as names:
                return iter([e.name for e in islice(names, self.max_entries - self.seen + 1)])
        except OSError:
            self.unreadable += 1
            return iter(())


def copy_tree(source: Path, target: Path, max_depth: int = MAX_DEPTH, max_entries: int = MAX_ENTRIES) -> Walk:
    """Copy `source` into a new folder `target` (files with their modes, symlinks as symlinks),
    within the walk's bounds. Returns the walk: `left_out` and `failed` say what was not copied."""
    walk = Walk(source, max_depth, max_entries)
    target.mkdir(parents=True, exist_ok=True)
    made: dict[tuple[str, ...], int] = {(): os.open(target, _DIR_FLAGS)}
    try:
        for entry in walk:
            into = made.get(entry.parts[:-1])
            if into is None:  # its folder could not be made
                walk.failed += 1
                continue
            try:
                _copy_entry(entry, into)
                if entry.is_dir:
                    made[entry.parts] = os.open(entry.name, _DIR_FLAGS, dir_fd=into)
            except OSError:
                walk.failed += 1
            _close_finished(made, entry.parts)
    finally:
        for fd in made.values():
            os.close(fd)
    return walk


def _copy_entry(entry: Entry, into: int) -> None:
    if entry.is_dir:
        os.mkdir(entry.name, 0o700, dir_fd=into)
    elif entry.is_symlink:
        os.symlink(os.readlink(entry.name, dir_fd=entry.folder_fd), entry.name, dir_fd=into)
    elif entry.is_file:
        src = os.open(entry.name, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), dir_fd=entry.folder_fd)
        try:
            dst = os.open(
                entry.name,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0),
                stat.S_IMODE(entry.mode),
                dir_fd=into,
            )
            try:
                _copy_data(src, dst)
            finally:
                os.close(dst)
        finally:
            os.close(src)
    # sockets, FIFOs and devices are not copied


COPY_CHUNK = 1 << 20


def _copy_data(src: int, dst: int) -> None:
    """The content of `src` into the empty file `dst`, data region by data region (SEEK_DATA,
    SEEK_HOLE), holes left as holes: the copy takes no more disk than the original, so a file the
    model made long but empty (the quota counts blocks, not lengths) stays as cheap. A filesystem
    that cannot tell holes answers with one region, the whole file."""
    length = os.fstat(src).st_size
    offset = 0
    while (region := _next_data(src, offset, length)) is not None:
        offset = _copy_region(src, dst, *region)
    os.ftruncate(dst, length)


def _next_data(src: int, offset: int, length: int) -> tuple[int, int] | None:
    """(start, end) of the next data region at or after `offset` and before `length`; None: no more."""
    try:
        start = os.lseek(src, offset, os.SEEK_DATA)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # nothing but a hole from `offset` on
            return None
        raise
    return (start, min(os.lseek(src, start, os.SEEK_HOLE), length)) if start < length else None


def _copy_region(src: int, dst: int, start: int, end: int) -> int:
    """Copy bytes [start, end) of `src` to the same place in `dst`; where the next region is looked for."""
    while start < end:
        chunk = os.pread(src, min(COPY_CHUNK, end - start), start)
        if not chunk:  # the file was cut short meanwhile
            return end
        start += os.pwrite(dst, chunk, start)
    return end


def _close_finished(made: dict[tuple[str, ...], int], parts: tuple[str, ...]) -> None:
    """Close the target folders the pre-order walk has left for good (not an ancestor of `parts`)."""
    for key in [k for k in made if k and k != parts[: len(k)]]:
        os.close(made.pop(key))


def remove_tree(root: Path) -> bool:
    """Remove `root` and everything below it, however deep, holding one folder open at a time
    (it descends, and climbs back through `..`). Never follows a symlink. True when it is gone."""
    names: list[str] = []
    try:
        fd = os.open(root, _DIR_FLAGS)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        while True:
            sub = _clear_files(fd)
            if sub is not None:
                child = os.open(sub, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = child
                names.append(sub)
                continue
            if not names:
                break
            parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = parent
            os.rmdir(names.pop(), dir_fd=fd)
    except OSError:
        return False
    finally:
        os.close(fd)
    with contextlib.suppress(OSError):
        os.rmdir(root)
    return not os.path.lexists(root)


def _clear_files(fd: int) -> str | None:
    """Unlink every non-folder in the open folder; the name of one subfolder left, or None."""
    folder = None
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                folder = folder or entry.name
            else:
                os.unlink(entry.name, dir_fd=fd)
    return folder
