"""The workspace (agent/tools/workspace.py): `confined_path`, the gate every path from the model
goes through, and `protection`, the rule of what is refused even inside it. How the file tools
use them is in tests/tools/test_files.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.tools import ToolError
from agent.tools.workspace import confined_path, ensure_workspace, protection, workspace_root
from tests.tools.helpers import ctx_for


@pytest.fixture
def fhome(tmp_path: Path) -> Path:
    """A home with a file in its workspace."""
    home = tmp_path / "home"
    (home / "workspace").mkdir(parents=True)
    (home / "workspace" / "inside.txt").write_text("inside")
    return home.resolve()


@pytest.fixture
def ws(fhome: Path) -> Path:
    return fhome / "workspace"


@pytest.mark.parametrize(
    ("relative", "why"),
    [
        ("scratchpad/active.yaml", "belongs to the runtime (scratchpad)"),
        ("config.yaml", "belongs to the runtime (config.yaml)"),
        (".agent.lock", "belongs to the runtime (.agent.lock)"),
        ("templates/x.md", "belongs to the runtime (templates)"),
        ("workspace/.env", "is or is inside a dot-file (.env)"),
        ("workspace/a/.git/config", "is or is inside a dot-file (.git)"),
        ("workspace/notes.py", None),  # a separate workspace may hold code
        ("workspace/sub", None),
    ],
)
def test_protection_in_a_separate_workspace(fhome: Path, relative: str, why: str | None):
    assert protection(fhome, fhome / "workspace", fhome / relative) == why


@pytest.mark.parametrize(
    ("relative", "why"),
    [
        ("notes.TXT", None),
        ("photo.JPeg", None),
        ("build.rs", "is not a plain data file (build.rs)"),
        ("Taskfile.yml", "is not a plain data file (Taskfile.yml)"),
        ("REQUIREMENTS.txt", "is not a plain data file (REQUIREMENTS.txt)"),  # read by name
        ("Claude.md", "is not a plain data file (Claude.md)"),
        ("node_modules/x.txt", "is inside a folder of code (node_modules)"),
        ("a/BIN/x.txt", "is inside a folder of code (BIN)"),
        ("pkg.egg-info/x.txt", "is inside a folder of code (pkg.egg-info)"),
        ("pkg/sub/data.csv", "is inside a Python package (pkg)"),
        ("plain", None),  # a folder: what matters is the files in it
        ("run.txt", "is an executable file (run.txt)"),
    ],
)
def test_protection_in_a_whole_home_workspace(fhome: Path, relative: str, why: str | None):
    (fhome / "pkg" / "sub").mkdir(parents=True)
    (fhome / "pkg" / "__init__.py").write_text("")
    (fhome / "plain").mkdir()
    (fhome / "run.txt").write_text("#!/bin/sh\n")
    (fhome / "run.txt").chmod(0o755)
    problem = protection(fhome, fhome, fhome / relative)
    assert problem == why or (why is not None and problem.startswith(why))


def test_a_confined_path_resolves_inside_the_workspace(fhome: Path, ws: Path):
    ctx = ctx_for(fhome)
    assert confined_path(ctx, "inside.txt") == ws / "inside.txt"
    assert confined_path(ctx, "./a/b/inside.txt") == ws / "a" / "b" / "inside.txt"
    assert confined_path(ctx, str(ws / "new.txt"), for_writing=True) == ws / "new.txt"
    assert confined_path(ctx, ".") == ws


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("", "the path is empty or contains a NUL byte"),
        ("a\x00b", "the path is empty or contains a NUL byte"),
        ("a/../../x", "contains '..'; paths must stay inside the workspace"),
        ("/etc/passwd", "is /etc/passwd, outside the workspace"),
        ("../workspace/inside.txt", "contains '..'"),
        ("x" * 1025, "the tools take at most 1024 characters and 32 levels"),
        ("/".join("d" * 33), "the tools take at most 1024 characters and 32 levels"),
        (".ssh/id_rsa", "is or is inside a dot-file (.ssh); the model's tools may not read or write it"),
    ],
)
def test_a_bad_path_is_a_tool_error_saying_why(fhome: Path, path: str, message: str):
    with pytest.raises(ToolError) as refused:
        confined_path(ctx_for(fhome), path)
    assert message in str(refused.value)


def test_a_symlink_out_says_where_it_leads_and_one_to_a_dot_file_is_refused(fhome: Path, ws: Path):
    os.symlink(fhome.parent, ws / "out")
    os.symlink(ws / ".env", ws / "innocent.txt")
    (ws / ".env").write_text("KEY=1")
    with pytest.raises(ToolError, match=f"path 'out/x' resolves through a symlink to {fhome.parent}/x, outside"):
        confined_path(ctx_for(fhome), "out/x")
    with pytest.raises(ToolError, match=r"is or is inside a dot-file \(\.env\)"):
        confined_path(ctx_for(fhome), "innocent.txt")


@pytest.mark.parametrize("workspace", ["scratchpad", ".git", "logs"])
def test_a_workspace_the_rule_refuses_is_a_tool_error_naming_the_setting(fhome: Path, workspace: str):
    (fhome / workspace).mkdir()
    with pytest.raises(ToolError, match="fix 'workspace' in config.yaml"):
        workspace_root(ctx_for(fhome, workspace=workspace))
    assert ensure_workspace(fhome, ctx_for(fhome, workspace=workspace).settings) is None


def test_ensure_workspace_creates_the_folder_and_keeps_an_existing_one(fhome, ws):
    settings = ctx_for(fhome).settings
    assert ensure_workspace(fhome, settings) == ws.resolve() and (ws / "inside.txt").exists()
    (fhome / "other").mkdir()
    assert ensure_workspace(fhome / "other", settings) == (fhome / "other" / "workspace").resolve()


def test_a_file_standing_where_the_workspace_goes_is_no_workspace_and_is_kept(fhome: Path):
    (fhome / "work").write_text("the operator's file")
    assert ensure_workspace(fhome, ctx_for(fhome, workspace="work").settings) is None
    assert (fhome / "work").read_text() == "the operator's file"


def test_the_cycle_end_settles_only_a_workspace_inside_the_home(tmp_path):
    """A workspace setting that resolves out of the home (a link someone made) is never walked,
    stripped or handed over: settling changes nothing outside the home."""
    import os
    import stat

    from agent.config import Settings
    from agent.tools.workspace import settle_workspace

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "tool").write_text("x")
    os.chmod(outside / "tool", 0o4755)
    home = tmp_path / "home"
    home.mkdir()
    (home / "workspace").symlink_to(outside)
    assert settle_workspace(home, Settings()) is None
    assert stat.S_IMODE((outside / "tool").stat().st_mode) == 0o4755
    assert (outside / "tool").stat().st_uid == os.geteuid()
    (home / "workspace").unlink()
    (home / "workspace").mkdir()
    (home / "workspace" / "tool").write_text("x")
    os.chmod(home / "workspace" / "tool", 0o4755)
    assert settle_workspace(home, Settings()).startswith("workspace: removed setuid, setgid or world-write bits")
    assert stat.S_IMODE((home / "workspace" / "tool").stat().st_mode) == 0o755


def test_a_folder_moved_while_the_walk_is_below_it_stops_the_walk_inside_the_workspace(tmp_path):
    """The quota's watch walks while a command runs: a command that moves the folder the walk is
    in (so `..` no longer leads back) stops the walk, said as unreadable (over quota), and the walk
    never climbs out of the workspace into the home."""
    from agent.tools.workspace import WorkspaceWalk

    home = tmp_path / "home"
    (home / "workspace" / "a" / "b").mkdir(parents=True)
    (home / "workspace" / "a" / "b" / "deep.txt").write_text("x")
    (home / "workspace" / "z.txt").write_text("x")
    (home / "secret-beside-the-workspace").write_text("never walked")
    walk = WorkspaceWalk(home / "workspace")
    seen = []
    for found in walk:
        seen.append(found.path)
        if found.name == "deep.txt":  # the walk is in a/b: move it up to the workspace's top
            (home / "workspace" / "a" / "b").rename(home / "workspace" / "b")
    assert walk.unreadable == ["a (moved while it was walked)"]
    assert "secret-beside-the-workspace" not in " ".join(seen)
