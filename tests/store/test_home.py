"""Home: the one list of a home's files; nothing else in the package spells their names."""

from __future__ import annotations

import ast
import stat
from pathlib import Path

from agent.store.home import Home
from agent.tools.workspace import RUNTIME_NAMES
from tests.helpers import REPO


def _home_paths(home: Home) -> dict[str, Path]:
    """Every file or folder Home names (properties and per-cycle paths), by attribute."""
    paths = {name: getattr(home, name) for name, value in vars(Home).items() if isinstance(value, property)}
    paths = {name: p for name, p in paths.items() if isinstance(p, Path)}
    paths |= {
        "snapshot": home.snapshot("20260101_000000_00", "before"),
        "cycle_log": home.cycle_log("20260101_000000_00"),
    }
    return paths


def test_every_path_of_a_home_is_inside_it_and_distinct(tmp_path):
    home = Home.at(tmp_path)
    paths = _home_paths(home)
    assert all(p.is_relative_to(home.root) and p != home.root for p in paths.values())
    assert len(set(paths.values())) == len(paths)


def test_the_tools_never_reach_the_runtimes_or_the_operators_files():
    assert RUNTIME_NAMES == {
        "scratchpad",
        "logs",
        ".agent.lock",
        "config.yaml",
        "rules.md",
        "examples.yaml",
        "templates",
    }


def test_no_module_but_home_spells_a_homes_file_name():
    """A string literal naming one of the home's files outside store/home.py is a path built outside Home."""
    names = {p.name for p in _home_paths(Home(Path("/h"))).values()} - {"scratchpad", "logs", "templates"}
    found = []
    for path in sorted((REPO / "agent").rglob("*.py")):
        if path == REPO / "agent" / "store" / "home.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in names:
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value!r}")
    assert not found, "home paths built outside Home:\n" + "\n".join(found)


def test_ensure_dirs_makes_the_private_folders(tmp_path):
    home = Home.at(tmp_path / "h")
    home.ensure_dirs()
    for folder in (home.scratchpad, home.logs):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
