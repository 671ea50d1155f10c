"""Durable files: atomic replacement, JSON-lines appends that are whole or absent, readers that
survive torn records, stale temporary files, and reading text files that may be hostile."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import subprocess
import sys

import pytest

from agent.common.outcomes import DiskError
from agent.common.safe_yaml import FileRefused, read_text_file
from agent.store.files import append_jsonl, atomic_write, read_jsonl
from agent.store.home import Home, remove_stale_temporaries


def records(*numbers: int) -> list[dict]:
    return [{"n": n, "text": f"record {n}"} for n in numbers]


def line(record: dict) -> bytes:
    return (json.dumps(record) + "\n").encode()


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


# ----------------------------------------------------------------------------- JSON-line appends


def test_appended_records_read_back_in_order(tmp_path):
    path = tmp_path / "archive.jsonl"
    append_jsonl(path, records(1, 2))
    append_jsonl(path, records(3))
    assert read_jsonl(path, "n") == records(1, 2, 3)


def test_an_append_after_a_torn_record_starts_a_new_line_so_the_new_record_is_read(tmp_path):
    path = tmp_path / "archive.jsonl"
    path.write_bytes(line(records(1)[0]) + b'{"n": 2, "text": "rec')  # a crash mid-append
    append_jsonl(path, records(3))
    assert read_jsonl(path, "n") == records(1, 3)
    assert path.read_bytes().endswith(b'"rec\n' + line(records(3)[0]))


def test_a_record_glued_to_a_torn_one_by_an_older_version_is_still_read(tmp_path):
    path = tmp_path / "index.jsonl"
    glued = {"n": 3, "usage": {"prompt": 1}, "text": 'a {"quoted"} brace'}
    path.write_bytes(line(records(1)[0]) + b'{"n": 2, "usage": {"pro' + line(glued) + line(records(4)[0]))
    assert read_jsonl(path, "n") == [records(1)[0], glued, records(4)[0]]


def test_a_foreign_line_is_skipped(tmp_path):
    path = tmp_path / "index.jsonl"
    path.write_bytes(line(records(1)[0]) + b"not json\n" + line({"other": 1}) + b"[1, 2]\n" + line(records(2)[0]))
    assert read_jsonl(path, "n") == records(1, 2)


def test_hostile_lines_are_skipped_quickly_without_a_crash(tmp_path):
    path = tmp_path / "index.jsonl"
    nested = '{"n": ' * 100_000 + "1" + "}" * 100_000
    path.write_text(nested + "\n" + '{"n": [' + '{"n": 1},' * 50_000 + "\n" + line(records(1)[0]).decode())
    assert read_jsonl(path, "n") == records(1)


def test_a_record_holding_a_unicode_line_separator_is_read_back(tmp_path):
    path = tmp_path / "archive.jsonl"
    odd = [{"n": 1, "text": "one\u2028two\u2029three\x85four"}]
    append_jsonl(path, odd)
    assert read_jsonl(path, "n") == odd


def test_a_short_write_is_continued_until_the_records_are_whole(tmp_path, monkeypatch):
    path = tmp_path / "archive.jsonl"
    real_write = os.write
    calls = []

    def at_most_seven_bytes(fd, data):
        calls.append(len(data))
        return real_write(fd, bytes(data[:7]))

    with monkeypatch.context() as patched:
        patched.setattr(os, "write", at_most_seven_bytes)
        append_jsonl(path, records(1, 2))
    assert len(calls) > 2
    assert read_jsonl(path, "n") == records(1, 2)


def test_an_append_that_fills_the_disk_leaves_no_torn_record_and_raises_disk_error(tmp_path, monkeypatch):
    path = tmp_path / "archive.jsonl"
    append_jsonl(path, records(1))
    before = path.read_bytes()
    real_write = os.write

    def half_then_full(fd, data):
        if len(data) == len(line(records(2)[0])):
            return real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as patched:
        patched.setattr(os, "write", half_then_full)
        with pytest.raises(DiskError, match=r"archive.jsonl.*\(the disk is full\)"):
            append_jsonl(path, records(2))
    assert path.read_bytes() == before
    append_jsonl(path, records(3))
    assert read_jsonl(path, "n") == records(1, 3)


def test_an_append_whose_fsync_fails_leaves_no_record_and_raises_disk_error(tmp_path, monkeypatch):
    path = tmp_path / "index.jsonl"
    append_jsonl(path, records(1))

    def no_room(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as patched:
        patched.setattr(os, "fsync", no_room)
        with pytest.raises(DiskError, match="the disk is full"):
            append_jsonl(path, records(2))
    assert path.read_bytes() == line(records(1)[0])


def test_reading_the_tail_returns_only_whole_records_in_the_last_bytes(tmp_path):
    path = tmp_path / "index.jsonl"
    append_jsonl(path, records(*range(100)))
    last_two = len(line(records(98)[0])) + len(line(records(99)[0]))
    assert read_jsonl(path, "n", tail_bytes=last_two) == records(98, 99)
    assert read_jsonl(path, "n", tail_bytes=last_two + 3) == records(98, 99)
    assert read_jsonl(path, "n", tail_bytes=10**9) == records(*range(100))
    assert read_jsonl(tmp_path / "missing.jsonl", "n", tail_bytes=100) == []


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
        "import sys; from pathlib import Path; from agent.store.files import atomic_write; "
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
