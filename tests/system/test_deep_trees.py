"""A tree the model shaped (1,200 folders deep, or paths past PATH_MAX) breaks no walk: the
after-crash sweep, `agent replay`'s copy and its removal are iterative and bounded
(`agent/common/walk.py`), and the file tools refuse paths that deep or that long."""

from __future__ import annotations

import os
import re
import signal
import tempfile
from pathlib import Path

import pytest

from agent.common.walk import Walk, copy_tree, remove_tree
from agent.tools import ToolError
from agent.tools.workspace import confined_path
from tests.helpers import run_agent_process, run_cli, write_script
from tests.tools.helpers import ctx_for

STALE = ".note.txt.4242.0123abcd.tmp"  # named like atomic_write's temporary files


@pytest.fixture
def tmp_path():
    """A folder outside pytest's own, removed here: pytest's clean-up is recursive and would
    crash on a deep tree (in a later session, perhaps someone else's)."""
    folder = Path(tempfile.mkdtemp(prefix="agent-deep-trees-"))
    try:
        yield folder
    finally:
        assert remove_tree(folder)


def _deep(root: Path, depth: int, name: str = "d") -> Path:
    """Folders `depth` levels deep below root, made fd by fd (no path is ever long); a stale
    temporary file at the bottom. Returns the top folder."""
    top = root / name
    top.mkdir()
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth - 1):
            os.mkdir(name, dir_fd=fd)
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        os.close(os.open(STALE, os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
    finally:
        os.close(fd)
    return top


def _killed_home(tmp_path: Path, depth: int, name: str = "d") -> tuple[Path, Path]:
    """A home whose workspace holds a deep tree, and whose last cycle was killed (kill -9) while
    write_file was writing, leaving a temporary file beside note.txt."""
    home = tmp_path / "home"
    assert run_cli("init", str(home)).exit_code == 0
    _deep(home / "workspace", depth, name)
    script = write_script(
        tmp_path,
        [
            {"tool": "write_file", "args": {"path": "note.txt", "content": "x"}},
            {"tool": "done", "args": {"summary": "wrote"}},
        ],
    )
    for kill_at in range(1, 40):
        killed = run_agent_process(
            "run", "--home", str(home), "--model", f"scripted:{script}", "-q", env={"AGENT_TEST_KILL_AT": str(kill_at)}
        )
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        if "killed at note.txt: temporary file written" in killed.stderr:
            break
    assert [p.name for p in (home / "workspace").glob(".note.txt.*.tmp")], "no leftover from the kill"
    return home, script


@pytest.mark.parametrize("depth, name", [(1200, "d"), (40, "n" * 200)], ids=["1200-deep", "past-PATH_MAX"])
def test_after_a_kill_the_next_run_and_a_replay_work_whatever_the_tree(tmp_path, depth, name):
    home, script = _killed_home(tmp_path, depth, name)
    run = run_agent_process("run", "--home", str(home), "--model", f"scripted:{script}", "--json")
    assert run.returncode == 0, run.stderr
    assert not list((home / "workspace").glob(".note.txt.*.tmp"))  # the sweep removed the kill's leftover
    latest = sorted((home / "logs").glob("cycle_*.log"))[-1].read_text()
    if depth > 128:
        assert re.search(r"after-crash sweep did not reach .*deeper than 128 levels", latest)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    replay = run_agent_process(
        "replay", "latest", "--home", str(home), "--model", f"scripted:{script}", env={"TMPDIR": str(scratch)}
    )
    assert replay.returncode == 0, replay.stderr
    assert "Traceback" not in replay.stderr
    if depth > 128:
        assert "replay: not copied from workspace/: 1 folder(s) deeper than 128 levels" in replay.stderr
    assert not list(scratch.iterdir())  # the scratch copy, however deep, was removed


@pytest.mark.parametrize(
    "path",
    [
        "/".join(["d"] * 1200) + "/f.txt",  # the reproduction
        "/".join(["d"] * 33),  # one level past the cap
        "x" * 1025,
    ],
)  # one character past it
def test_the_file_tools_refuse_paths_too_deep_or_too_long(tmp_path, path):
    (tmp_path / "workspace").mkdir()
    with pytest.raises(ToolError, match="the tools take at most 1024 characters and 32 levels"):
        confined_path(ctx_for(tmp_path), path)
    confined_path(ctx_for(tmp_path), "/".join(["d"] * 32))  # the cap itself is fine


def test_copy_and_remove_are_bounded_and_iterative(tmp_path):
    top = _deep(tmp_path, 1200)
    (top / "file").write_text("kept")
    os.symlink("/etc/passwd", top / "link")
    copied = copy_tree(top, tmp_path / "copy", max_depth=10)
    assert copied.too_deep == 1 and (tmp_path / "copy" / "file").read_text() == "kept"
    assert os.readlink(tmp_path / "copy" / "link") == "/etc/passwd"  # copied as a link, never followed
    assert "deeper than 10 levels" in copied.describe()
    walk = Walk(top, max_entries=50)
    assert len(list(walk)) == 50 and walk.cut
    assert remove_tree(top) and not top.exists()
    assert remove_tree(tmp_path / "copy") and not (tmp_path / "copy").exists()
