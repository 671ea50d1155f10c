"""The file tools: confined to the workspace (no .., no absolute path or symlink out, no write
to the runtime's files), with capped sizes."""

from __future__ import annotations

import pytest
import yaml

from agent.config import load_settings
from agent.dispatcher import Kind
from agent.outcomes import UsageError
from agent.tools.files import MAX_LIST_ENTRIES, list_dir, read_file
from tests.tools.helpers import call, ctx_for


@pytest.fixture
def fhome(tmp_path):
    """A home with a file inside, and a secret outside it."""
    home = tmp_path / "home"
    (home / "scratchpad").mkdir(parents=True)
    (home / "scratchpad" / "active.yaml").write_text("notes: ''\n")
    (home / "inside.txt").write_text("inside")
    (tmp_path / "secret.txt").write_text("s3cr3t")
    (tmp_path / "outdir").mkdir()
    return home


@pytest.mark.parametrize("tool, args", [
    ("read_file", {"path": "../secret.txt"}),
    ("read_file", {"path": "sub/../../secret.txt"}),
    ("write_file", {"path": "../evil.txt", "content": "x"}),
    ("append_file", {"path": "../secret.txt", "content": "x"}),
    ("list_dir", {"path": ".."}),
])
def test_file_tools_refuse_dot_dot_and_touch_nothing(fhome, tool, args):
    before = (fhome.parent / "secret.txt").read_text()
    kind, note = call(ctx_for(fhome), tool, **args)
    assert kind is Kind.TOOL_ERROR and "contains '..'" in note
    assert (fhome.parent / "secret.txt").read_text() == before and not (fhome.parent / "evil.txt").exists()


@pytest.mark.parametrize("tool, extra", [("read_file", {}), ("write_file", {"content": "x"}),
                                         ("append_file", {"content": "x"}), ("list_dir", {})])
def test_file_tools_refuse_absolute_paths_outside_the_workspace(fhome, tool, extra):
    target = str(fhome.parent / ("outdir" if tool == "list_dir" else "secret.txt"))
    kind, note = call(ctx_for(fhome), tool, path=target, **extra)
    assert kind is Kind.TOOL_ERROR and "outside the workspace" in note
    assert (fhome.parent / "secret.txt").read_text() == "s3cr3t"


def test_absolute_paths_inside_the_workspace_are_fine(fhome):
    assert call(ctx_for(fhome), "read_file", path=str(fhome / "inside.txt"))[1].endswith("-> inside")


@pytest.mark.parametrize("tool, path, extra", [
    ("read_file", "link.txt", {}), ("write_file", "link.txt", {"content": "x"}),
    ("append_file", "link.txt", {"content": "x"}), ("list_dir", "linkdir", {}),
    ("write_file", "linkdir/new.txt", {"content": "x"}),
])
def test_file_tools_refuse_symlinks_that_resolve_outside(fhome, tool, path, extra):
    (fhome / "link.txt").symlink_to(fhome.parent / "secret.txt")
    (fhome / "linkdir").symlink_to(fhome.parent / "outdir")
    kind, note = call(ctx_for(fhome), tool, path=path, **extra)
    assert kind is Kind.TOOL_ERROR and "resolves through a symlink to" in note and "s3cr3t" not in note
    assert (fhome.parent / "secret.txt").read_text() == "s3cr3t" and list((fhome.parent / "outdir").iterdir()) == []


def test_symlinks_inside_the_workspace_are_followed(fhome):
    (fhome / "alias.txt").symlink_to(fhome / "inside.txt")
    assert call(ctx_for(fhome), "read_file", path="alias.txt")[1].endswith("-> inside")


@pytest.mark.parametrize("path", ["scratchpad/active.yaml", "scratchpad/new.yaml", "logs/cycle_1.log",
                                  "config.yaml", ".agent.lock", "rules.md", "./scratchpad/x"])
def test_runtime_files_are_not_writable(fhome, path):
    before = (fhome / "scratchpad" / "active.yaml").read_text()
    for tool in ("write_file", "append_file"):
        kind, note = call(ctx_for(fhome), tool, path=path, content="forged")
        assert kind is Kind.TOOL_ERROR and "belongs to the runtime" in note
    assert (fhome / "scratchpad" / "active.yaml").read_text() == before
    assert not (fhome / path).exists() or path == "scratchpad/active.yaml"


def test_runtime_files_cannot_be_written_through_a_symlink_either(fhome):
    (fhome / "innocent.yaml").symlink_to(fhome / "scratchpad" / "active.yaml")
    kind, note = call(ctx_for(fhome), "write_file", path="innocent.yaml", content="forged")
    assert kind is Kind.TOOL_ERROR and "belongs to the runtime" in note
    assert (fhome / "scratchpad" / "active.yaml").read_text() == "notes: ''\n"


def test_runtime_files_can_still_be_read(fhome):
    assert call(ctx_for(fhome), "read_file", path="scratchpad/active.yaml")[0] is Kind.TOOL


def test_a_configured_workspace_confines_file_tools_to_that_folder(fhome):
    ctx = ctx_for(fhome, workspace="work")
    assert call(ctx, "write_file", path="a/b.txt", content="hi")[0] is Kind.TOOL
    assert (fhome / "work" / "a" / "b.txt").read_text() == "hi"
    kind, note = call(ctx, "read_file", path=str(fhome / "inside.txt"))
    assert kind is Kind.TOOL_ERROR and "outside the workspace" in note


@pytest.mark.parametrize("workspace", ["../elsewhere", "/tmp", "."])
def test_a_workspace_outside_the_home_is_a_config_error(tmp_path, workspace):
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"workspace": workspace}))
    with pytest.raises(UsageError, match="setting 'workspace' must be a relative folder"):
        load_settings(tmp_path, env={})


def test_a_workspace_symlinked_out_of_the_home_is_refused(fhome):
    (fhome / "work").symlink_to(fhome.parent / "outdir")
    kind, note = call(ctx_for(fhome, workspace="work"), "write_file", path="x.txt", content="x")
    assert kind is Kind.TOOL_ERROR and "outside the home" in note
    assert list((fhome.parent / "outdir").iterdir()) == []


def test_read_file_is_capped_with_a_marker(fhome):
    (fhome / "big.txt").write_text("a" * 1000)
    out = read_file(ctx_for(fhome, file_max_read=10), "big.txt")
    assert out == "a" * 10 + "\n[file is 1000 bytes; only the first 10 were read]"


def test_oversized_writes_and_appends_are_refused_and_change_nothing(fhome):
    ctx = ctx_for(fhome, file_max_write=10)
    kind, note = call(ctx, "write_file", path="inside.txt", content="x" * 11)
    assert kind is Kind.TOOL_ERROR and "11 bytes, over the 10-byte limit" in note
    kind, note = call(ctx, "append_file", path="inside.txt", content="12345")
    assert kind is Kind.TOOL_ERROR and "would be 11 bytes, over the 10-byte limit" in note
    assert (fhome / "inside.txt").read_text() == "inside"


def test_write_file_replaces_the_whole_file_and_leaves_no_temp_file(fhome):
    assert call(ctx_for(fhome), "write_file", path="inside.txt", content="new")[1].endswith("-> wrote 3 bytes to inside.txt")
    assert (fhome / "inside.txt").read_text() == "new"
    assert sorted(p.name for p in fhome.iterdir()) == ["inside.txt", "scratchpad"]


def test_append_file_creates_the_file_then_appends_to_it(fhome):
    ctx = ctx_for(fhome)
    assert call(ctx, "append_file", path="log/j.txt", content="one\n")[0] is Kind.TOOL
    kind, note = call(ctx, "append_file", path="log/j.txt", content="two\n")
    assert kind is Kind.TOOL and "now 8 bytes" in note
    assert (fhome / "log" / "j.txt").read_text() == "one\ntwo\n"


def test_list_dir_shows_folders_symlinks_and_sizes_and_caps_entries(fhome):
    (fhome / "alias").symlink_to(fhome / "inside.txt")
    out = list_dir(ctx_for(fhome))
    assert out.splitlines() == ["alias@", "inside.txt (6 bytes)", "scratchpad/"]
    many = fhome / "many"
    many.mkdir()
    for i in range(MAX_LIST_ENTRIES + 5):
        (many / f"f{i:04d}").touch()
    assert list_dir(ctx_for(fhome), "many").endswith("\n[5 more entries not shown]")


@pytest.mark.parametrize("tool, args, why", [
    ("read_file", {"path": "nope.txt"}, "no such file"), ("read_file", {"path": ""}, "empty"),
    ("list_dir", {"path": "inside.txt"}, "no such folder"), ("write_file", {"path": "scratchpad", "content": ""}, "runtime"),
])
def test_file_tool_bad_paths_are_explained(fhome, tool, args, why):
    kind, note = call(ctx_for(fhome), tool, **args)
    assert kind is Kind.TOOL_ERROR and why in note
