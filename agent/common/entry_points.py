"""Entry points, read cheaply: which installed distributions declare what, in which group.

importlib.metadata answers the same question, but importing it (and the email package it parses
metadata with) costs more than the rest of a cycle's start-up. This reads the entry_points.txt of
each distribution on sys.path (its `.dist-info` or `.egg-info` folder), as importlib.metadata does:
a distribution found twice counts where it is found first, and nothing is imported until an entry
point is loaded.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from dataclasses import dataclass
from typing import Any, Iterable


@dataclass(frozen=True)
class EntryPoint:
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
        try:
            entries = sorted(os.scandir(folder or "."), key=lambda entry: entry.name)
        except OSError:
            continue
        for entry in entries:
            if not entry.name.endswith((".dist-info", ".egg-info")) or _dist_name(entry.name) in seen:
                continue
            seen.add(_dist_name(entry.name))
            try:
                with open(os.path.join(entry.path, "entry_points.txt"), encoding="utf-8") as handle:
                    text = handle.read()
            except (OSError, UnicodeDecodeError):
                continue
            if f"[{group}]" in text:
                found += [point for point in parse(text, _dist_name(entry.name)) if point.group == group]
    return found
