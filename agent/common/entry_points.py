"""Entry points, read cheaply: which installed distributions declare what, in which group.

importlib.metadata answers the same question, but importing it (and the email package it parses
metadata with) costs more than the rest of a cycle's start-up. This reads the entry_points.txt of
each distribution on sys.path (its `.dist-info` or `.egg-info` folder), as importlib.metadata does:
a distribution found twice counts where it is found first, and nothing is imported until an entry
point is loaded. Each folder is read once per process, again only once something is installed in it.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from typing import Any, Iterable, NamedTuple


class EntryPoint(NamedTuple):
    """One `name = value` line of a group, from the distribution `dist` (its name, normalized)."""

    dist: str
    group: str
    name: str
    value: str  # "module:attribute" (or a module alone); extras in [brackets] dropped

    def load(self) -> Any:
        """Import the module and return the attribute it names (ImportError, AttributeError)."""
        module, _, attribute = self.value.partition(":")
        found: Any = importlib.import_module(module.strip())
        for part in filter(None, attribute.strip().split(".")):
            found = getattr(found, part)
        return found


def normalized(name: str) -> str:
    """A distribution's name as PEP 503 compares it: lower case, runs of -_. as one '-'."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _dist_name(folder: str) -> str:
    stem = folder.rsplit(".", 1)[0]  # name-version.dist-info, name.egg-info, name-version-py3.11.egg-info
    return normalized(stem.split("-", 1)[0])


def parse(text: str, dist: str) -> list[EntryPoint]:
    """The entry points of one entry_points.txt (INI: [group] headers, `name = value` lines)."""
    found, group = [], None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            group = line[1:-1].strip()
        elif group is not None and "=" in line:
            name, _, value = line.partition("=")
            found.append(EntryPoint(dist, group, name.strip(), value.split("[", 1)[0].strip()))
    return found


def declared(group: str, paths: Iterable[str] | None = None) -> list[EntryPoint]:
    """Every entry point of `group` that a distribution on `paths` (sys.path) declares, in path order."""
    found: list[EntryPoint] = []
    seen: set[str] = set()
    for folder in sys.path if paths is None else paths:
        for dist, text in _distributions(folder):
            if dist in seen:
                continue
            seen.add(dist)
            if f"[{group}]" in text:
                found += [point for point in parse(text, dist) if point.group == group]
    return found


# folder -> (its mtime and link count when read, [(distribution, its entry_points.txt or "")]). A
# distribution installed or removed is a folder added or removed: both change the pair, so a folder
# is read again; a command asks several times (tools, providers) and reads each folder once.
_read: dict[str, tuple[tuple[int, int], list[tuple[str, str]]]] = {}


def _distributions(folder: str) -> list[tuple[str, str]]:
    """The distributions installed in `folder`, by name order, each with its entry_points.txt."""
    try:
        info = os.stat(folder or ".")
    except OSError:
        return []
    when = (info.st_mtime_ns, info.st_nlink)
    known = _read.get(folder)
    if known is not None and known[0] == when:
        return known[1]
    found = []
    try:
        entries = sorted(os.scandir(folder or "."), key=lambda entry: entry.name)
    except OSError:
        entries = []
    for entry in entries:
        if entry.name.endswith((".dist-info", ".egg-info")):
            try:
                with open(os.path.join(entry.path, "entry_points.txt"), encoding="utf-8") as handle:
                    text = handle.read()
            except (OSError, UnicodeDecodeError):
                text = ""
            found.append((_dist_name(entry.name), text))
    _read[folder] = (when, found)
    return found
