"""The workspace quota (agent/tools/quota.py): an iterative, bounded walk of what the model made,
and the refusal a file tool gives before a write that would go over. The file tools' own refusals
are in tests/tools/test_sandbox.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.tools.base import ToolError
from agent.tools.quota import ledger, refuse_if_over, usage_problem, workspace_usage
from tests.tools.helpers import ctx_for


def test_the_quota_walk_stops_one_entry_past_the_file_limit(tmp_path: Path):
    for i in range(50):
        (tmp_path / f"f{i}").write_text("x")
    assert workspace_usage(tmp_path, 10).files == 11 and not workspace_usage(tmp_path, 10).complete
    usage = workspace_usage(tmp_path, 1000)
    assert usage.complete and usage.files == 50 and usage.bytes >= 50


@pytest.mark.slow  # making and removing 1,200 nested folders takes seconds
def test_the_quota_walk_is_iterative_whatever_the_depth(tmp_path):
    """A folder nested deeper than Python's recursion limit is walked without a RecursionError."""
    depth = 1200
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        for _ in range(depth):  # relative mkdir/open: no path ever gets long
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)
    try:
        usage = workspace_usage(tmp_path, 100_000)
    finally:
        os.system(f"rm -rf {tmp_path}/d")  # shutil.rmtree would be recursive too
    assert usage.complete and usage.files == depth


def test_links_are_counted_never_followed_and_a_sparse_file_costs_its_blocks(tmp_path: Path):
    outside = tmp_path / "outside"
    outside.mkdir()
    for n in range(20):
        (outside / f"f{n}").write_bytes(b"x" * 4096)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    os.symlink(outside, workspace / "link")
    with open(workspace / "sparse", "wb") as sparse:
        sparse.truncate(1 << 30)  # 1 GiB long, nothing written
    usage = workspace_usage(workspace, 100)
    assert usage.files == 2 and usage.complete
    assert usage.bytes < 1 << 20


def test_a_missing_workspace_uses_nothing(tmp_path: Path):
    usage = workspace_usage(tmp_path / "missing", 10)
    assert (usage.bytes, usage.files, usage.complete) == (0, 0, True)


def _ctx(tmp_path: Path, **settings):
    (tmp_path / "workspace").mkdir(exist_ok=True)
    return ctx_for(tmp_path, **settings)


def quota_problem(ctx, adding: int = 0, new_files: int = 0) -> str | None:
    return usage_problem(ledger(ctx).usage(), ctx.settings, adding, new_files)


def test_the_problem_names_the_setting_it_is_over(tmp_path: Path):
    settings = dict(workspace_max_files=3, workspace_max_bytes=100_000)
    for n in range(3):
        (tmp_path / "workspace").mkdir(exist_ok=True)
        (tmp_path / "workspace" / f"f{n}").write_bytes(b"x" * 4096)
    ctx = _ctx(tmp_path, **settings)
    assert quota_problem(ctx) is None
    assert quota_problem(ctx, new_files=1) == (
        "the workspace holds 3 (+1) files and folders, 1 over workspace_max_files (3)"
    )
    (tmp_path / "workspace" / "f3").write_text("one too many")
    assert quota_problem(_ctx(tmp_path, **settings)) == (
        "the workspace holds 4+ files and folders, 1 over workspace_max_files (3)"
    )
    (tmp_path / "workspace" / "f3").unlink()
    ctx = _ctx(tmp_path, **settings)
    assert quota_problem(ctx, adding=100_000).startswith("the workspace would take ")
    assert quota_problem(ctx, adding=100_000).endswith(" over workspace_max_bytes (100000)")


def test_past_the_quota_a_write_that_grows_is_refused_saying_how_far_over_and_what_frees_it(tmp_path: Path):
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "big").write_bytes(b"x" * 20_000)
    ctx = _ctx(tmp_path, workspace_max_bytes=8192)
    with pytest.raises(ToolError) as refused:
        refuse_if_over(ctx, adding=10)
    used = workspace_usage(tmp_path / "workspace", 100).bytes
    assert str(refused.value).startswith(
        f"the workspace would take {used + 10} bytes, {used + 10 - 8192} over workspace_max_bytes (8192); "
    )
    assert "deleting or truncating files frees it" in str(refused.value)
    with pytest.raises(ToolError, match="files and folders, 1 over workspace_max_files"):
        refuse_if_over(_ctx(tmp_path, workspace_max_bytes=10**9, workspace_max_files=1), new_files=1)
    (tmp_path / "workspace" / "big").unlink()
    refuse_if_over(_ctx(tmp_path, workspace_max_bytes=8192), adding=10)  # under: no error


def test_past_the_quota_a_write_that_adds_nothing_is_let_through(tmp_path: Path):
    """As a filesystem's quota: growth is refused, a smaller or equal overwrite is not."""
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "big").write_bytes(b"x" * 20_000)
    ctx = _ctx(tmp_path, workspace_max_bytes=8192)
    refuse_if_over(ctx, adding=-12_000)
    refuse_if_over(ctx, adding=0)


def test_a_workspace_the_walk_cannot_count_refuses_every_write(tmp_path: Path):
    from agent.tools.quota import Ledger, Usage

    ctx = _ctx(tmp_path, workspace_max_bytes=8192)
    counted = Ledger(ctx.workspace, ctx.settings.workspace_max_files)
    counted._usage = Usage(0, 0, True, "locked")  # what a walk that met an unreadable folder leaves
    ctx.ledger = counted
    with pytest.raises(ToolError, match="cannot be counted: 'locked'.*read-only to commands"):
        refuse_if_over(ctx, adding=-100)


def test_what_lies_past_path_max_is_counted_not_skipped(tmp_path: Path):
    """40 folders of 200-character names: paths past PATH_MAX, which a path-based walk cannot open
    (ENAMETOOLONG) and so never counted. The walk goes down by descriptor: everything counts."""
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        for _ in range(40):
            os.mkdir("n" * 200, dir_fd=fd)
            inner = os.open("n" * 200, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        with open(os.open("hidden.bin", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd), "wb") as hidden:
            hidden.write(b"x" * 3_000_000)
    finally:
        os.close(fd)
    try:
        usage = workspace_usage(tmp_path, 1000)
    finally:
        os.system(f"rm -rf {tmp_path}/{'n' * 200}")
    assert usage.complete and not usage.unreadable
    assert usage.files == 41 and usage.bytes >= 3_000_000


def test_a_file_tools_write_is_added_to_the_count_without_a_walk(tmp_path: Path):
    from agent.tools.quota import ledger
    from tests.tools.helpers import call

    ctx = _ctx(tmp_path, workspace_max_bytes=100_000, workspace_max_files=10)
    counted = ledger(ctx)
    assert counted.usage().files == 0
    (tmp_path / "workspace" / "behind-its-back.txt").write_text("the operator, mid-cycle")  # not seen: no walk
    assert call(ctx, "write_file", path="a/b.txt", content="x" * 5000)[0].name == "TOOL"
    usage = counted.usage()
    assert (usage.files, usage.bytes >= 5000) == (2, True)  # the folder and the file
    counted.recount()  # as a command's end does, in the background
    assert counted.usage().files == 3


def test_the_folders_a_write_makes_count_before_it_is_let_through(tmp_path: Path):
    """write_file makes the folders of its path: a path 31 folders deep made 31 entries (and their
    blocks) in a call counted as one new file, past workspace_max_files."""
    from agent.tools.files import write_file

    ctx = _ctx(tmp_path, workspace_max_files=10)
    with pytest.raises(ToolError, match="files and folders, 22 over workspace_max_files"):
        write_file(ctx, "/".join(["d"] * 31) + "/x.txt", "hello")
    assert list((tmp_path / "workspace").iterdir()) == []
    assert write_file(ctx, "/".join(["d"] * 9) + "/x.txt", "hello").startswith("wrote 5 bytes")
    assert workspace_usage(tmp_path / "workspace", 100).files == 10
