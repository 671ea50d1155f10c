"""Durable files: atomic replacement, stale temporary files, and reading text files that may be hostile."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

import pytest

from agent.common.files import atomic_write
from agent.common.outcomes import DiskError
from agent.common.safe_yaml import FileRefused, read_text_file
from agent.store.home import Home, remove_stale_temporaries

# ------------------------------------------------------------------------------ atomic writes


def test_atomic_write_replaces_the_file_whole_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "active.yaml"
    target.write_text("old\n")
    atomic_write(target, b"new\n")
    assert target.read_bytes() == b"new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["active.yaml"]
    assert target.stat().st_mode & 0o777 == 0o600


def test_atomic_write_into_a_missing_folder_is_a_disk_error_naming_the_file(tmp_path):
    with pytest.raises(DiskError, match="could not write .*gone/active.yaml"):
        atomic_write(tmp_path / "gone" / "active.yaml", b"x")


# ------------------------------------------------------------------------- stale temporaries


def test_stale_temporaries_are_removed_from_the_home_and_anywhere_in_the_workspace(home):
    h = Home.at(home)
    h.ensure_dirs()
    workspace = home / "workspace"
    (workspace / "deep" / "er").mkdir(parents=True)
    stale = [
        h.scratchpad / ".active.yaml.4242.0a1b2c3d.tmp",
        h.logs / ".index.jsonl.7.ffffffff.tmp",
        workspace / ".notes.txt.31337.deadbeef.tmp",
        workspace / "deep" / "er" / ".a.b.c.1.01234567.tmp",
    ]
    kept = [
        workspace / ".hidden.tmp",
        workspace / "report.tmp",
        workspace / ".notes.txt.123.xyz.tmp",
        workspace / ".notes.txt.123.DEADBEEF.tmp",
        workspace / "notes.txt.1.deadbeef.tmp",
        h.scratchpad / ".editor-swap.tmp",
    ]
    for path in stale + kept:
        path.write_text("x")
    (workspace / ".dir.1.deadbeef.tmp").mkdir()
    removed = remove_stale_temporaries(h, workspace)
    assert sorted(removed) == sorted(stale)
    assert all(p.exists() for p in kept) and (workspace / ".dir.1.deadbeef.tmp").is_dir()


def test_the_temporary_file_of_a_write_killed_midway_is_removed_by_the_next_cleanup(home):
    workspace = home / "workspace"
    workspace.mkdir()
    write = (
        "import sys; from pathlib import Path; from agent.common.files import atomic_write; "
        "atomic_write(Path(sys.argv[1]), b'half')"
    )
    killed = subprocess.run(
        [sys.executable, "-c", write, str(workspace / "notes.txt")],
        env=dict(os.environ, AGENT_TEST_KILL_AT="1"),
        capture_output=True,
        text=True,
    )
    assert killed.returncode == -signal.SIGKILL and "temporary file created" in killed.stderr
    [leftover] = workspace.iterdir()
    assert remove_stale_temporaries(Home.at(home), workspace) == [leftover]
    assert list(workspace.iterdir()) == []


def test_without_a_workspace_only_the_home_folders_are_cleaned(home):
    h = Home.at(home)
    h.ensure_dirs()
    elsewhere = home / "workspace" / ".notes.txt.31337.deadbeef.tmp"
    elsewhere.parent.mkdir()
    elsewhere.write_text("x")
    assert remove_stale_temporaries(h) == []
    assert elsewhere.exists()


def test_a_symlinked_folder_in_the_workspace_is_not_entered(home, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / ".mine.txt.1.deadbeef.tmp").write_text("not the agent's")
    workspace = home / "workspace"
    workspace.mkdir()
    (workspace / "link").symlink_to(outside)
    assert remove_stale_temporaries(Home.at(home), workspace) == []
    assert (outside / ".mine.txt.1.deadbeef.tmp").exists()


# ------------------------------------------------------------------------------ text files


@contextlib.contextmanager
def fails_instead_of_hanging(seconds: float = 5):
    """Turn a hang into a test failure (SIGALRM interrupts a blocked open or read)."""

    def timed_out(signum, frame):
        raise TimeoutError("hung")

    previous = signal.signal(signal.SIGALRM, timed_out)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_read_text_file_returns_the_text_or_none_when_missing(tmp_path):
    (tmp_path / "rules.md").write_text("Be brief. ✓\n")
    assert read_text_file(tmp_path / "rules.md", "rules file", 100) == "Be brief. ✓\n"
    assert read_text_file(tmp_path / "missing.md", "rules file", 100) is None


def test_read_text_file_refuses_a_fifo_at_once_instead_of_hanging(tmp_path):
    os.mkfifo(tmp_path / "config.yaml")
    with (
        fails_instead_of_hanging(),
        pytest.raises(FileRefused, match=r"config.yaml: is not a regular file but a named pipe"),
    ):
        read_text_file(tmp_path / "config.yaml", "config file", 100)


def test_read_text_file_refuses_a_symlink_to_a_fifo_or_a_device(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "rules.md").symlink_to(tmp_path / "pipe")
    (tmp_path / "config.yaml").symlink_to("/dev/zero")
    with fails_instead_of_hanging():
        with pytest.raises(FileRefused, match="named pipe"):
            read_text_file(tmp_path / "rules.md", "rules file", 100)
        with pytest.raises(FileRefused, match="character device"):
            read_text_file(tmp_path / "config.yaml", "config file", 100)


def test_read_text_file_follows_a_symlink_to_a_regular_file(tmp_path):
    (tmp_path / "real.yaml").write_text("model: x\n")
    (tmp_path / "config.yaml").symlink_to(tmp_path / "real.yaml")
    assert read_text_file(tmp_path / "config.yaml", "config file", 100) == "model: x\n"


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: p.mkdir(), "is a directory, not a file"),
        (lambda p: p.write_bytes(b"x" * 101), "is 101 bytes, over the 100-byte limit for a config file"),
        (lambda p: p.write_bytes(b"model: caf\xe9\n"), r"is not UTF-8 text \(byte 10 is 0xe9\); is it binary\?"),
    ],
)
def test_read_text_file_refuses_what_is_not_bounded_utf8_text(tmp_path, make, message):
    make(tmp_path / "config.yaml")
    with pytest.raises(FileRefused, match=message) as refused:
        read_text_file(tmp_path / "config.yaml", "config file", 100)
    assert refused.value.path == tmp_path / "config.yaml" and str(refused.value).startswith(f"{tmp_path}/config.yaml: ")
