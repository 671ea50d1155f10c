"""Walking, copying and removing a tree the model shaped (agent/common/walk.py): symlinks never
followed, bounds counted instead of raised. The 1,200-deep and past-PATH_MAX trees are in
tests/system/test_deep_trees.py."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from agent.common.walk import Walk, copy_tree, remove_tree


def _tree(root: Path, outside: Path) -> Path:
    """a/b/c.txt, top.txt (0755), a link to `outside`, a fifo; returns root."""
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "c.txt").write_text("deep")
    (root / "top.txt").write_text("top")
    (root / "top.txt").chmod(0o755)
    os.symlink(outside, root / "out")
    os.mkfifo(root / "pipe")
    return root


def test_a_walk_lists_every_entry_once_pre_order_without_following_links(tmp_path: Path):
    outside = tmp_path / "outside"
    (outside / "secret").mkdir(parents=True)
    walk = Walk(_tree(tmp_path / "root", outside))
    entries = {"/".join(e.parts): e for e in walk}
    assert sorted(entries) == ["a", "a/b", "a/b/c.txt", "out", "pipe", "top.txt"]
    assert entries["out"].is_symlink and not entries["out"].is_dir  # a link to a folder is not entered
    assert entries["a"].is_dir and entries["a/b/c.txt"].is_file and not entries["pipe"].is_file
    order = [p for p in entries]
    assert order.index("a") < order.index("a/b") < order.index("a/b/c.txt")
    assert walk.left_out == 0 and walk.describe() == ""


def test_depth_and_entry_bounds_are_counted_and_described(tmp_path: Path):
    root = tmp_path / "root"
    (root / "1" / "2" / "3").mkdir(parents=True)
    shallow = Walk(root, max_depth=2)
    assert ["/".join(e.parts) for e in shallow] == ["1", "1/2"]
    assert shallow.too_deep == 1 and shallow.describe() == "1 folder(s) deeper than 2 levels"
    for n in range(10):
        (root / f"f{n}").write_text("")
    capped = Walk(root, max_entries=4)
    assert len(list(capped)) == 4 and capped.cut and capped.left_out == 1
    assert capped.describe() == "everything after the first 4 entries"


def test_a_missing_or_unusable_root_is_one_unreadable_folder_not_an_error(tmp_path: Path):
    (tmp_path / "file").write_text("x")
    os.symlink(tmp_path, tmp_path / "link")
    for root in (tmp_path / "missing", tmp_path / "file", tmp_path / "link"):
        walk = Walk(root)
        assert list(walk) == [] and walk.unreadable == 1, root
        assert walk.describe() == "1 unreadable folder(s)"


def test_a_copy_keeps_files_modes_and_links_as_links_and_skips_fifos(tmp_path: Path):
    outside = tmp_path / "outside.txt"
    outside.write_text("not to be copied")
    source = _tree(tmp_path / "root", outside)
    target = tmp_path / "copy"
    walk = copy_tree(source, target)
    assert walk.left_out == 0
    assert (target / "a" / "b" / "c.txt").read_text() == "deep"
    assert stat.S_IMODE((target / "top.txt").stat().st_mode) == 0o755
    assert os.readlink(target / "out") == str(outside) and (target / "out").is_symlink()
    assert not (target / "pipe").exists()
    assert stat.S_IMODE((target / "a").stat().st_mode) == 0o700


def test_a_copy_keeps_a_files_holes_as_holes(tmp_path: Path):
    """The quota counts blocks, so a file may be long and nearly empty; a copy that wrote its zeros
    out would take what the workspace never did (30 MB here; with many files, the whole disk)."""
    source = tmp_path / "root"
    source.mkdir()
    with open(source / "sparse", "wb") as made:
        made.write(b"head")
        made.seek(30_000_000)
        made.write(b"tail")
        made.truncate(40_000_000)
    copy_tree(source, tmp_path / "copy")
    copied = tmp_path / "copy" / "sparse"
    assert copied.read_bytes() == (source / "sparse").read_bytes()
    assert copied.stat().st_blocks <= (source / "sparse").stat().st_blocks


def test_a_copy_onto_an_existing_entry_counts_a_failure_and_goes_on(tmp_path: Path):
    source = tmp_path / "root"
    (source / "sub").mkdir(parents=True)
    (source / "sub" / "inner.txt").write_text("inner")
    (source / "other.txt").write_text("other")
    target = tmp_path / "copy"
    target.mkdir()
    (target / "sub").write_text("a file where the folder goes")
    walk = copy_tree(source, target)
    assert walk.failed == 2  # the folder, and what it held
    assert (target / "other.txt").read_text() == "other" and (target / "sub").read_text().startswith("a file")
    assert "2 entries that could not be copied" in walk.describe()


def test_remove_tree_removes_everything_and_never_follows_a_link(tmp_path: Path):
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "precious.txt").write_text("mine")
    root = _tree(tmp_path / "root", keep)
    os.symlink(keep, root / "a" / "b" / "into-keep")
    assert remove_tree(root) and not root.exists()
    assert (keep / "precious.txt").read_text() == "mine"
    assert remove_tree(tmp_path / "never-was")  # already gone: done


def test_remove_tree_of_a_symlink_removes_nothing_it_points_at(tmp_path: Path):
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "precious.txt").write_text("mine")
    os.symlink(keep, tmp_path / "link")
    assert not remove_tree(tmp_path / "link")  # not a folder of its own: refused
    assert (keep / "precious.txt").read_text() == "mine"
