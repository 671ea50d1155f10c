"""The file tools: confined to the workspace (no .., no absolute path or symlink out, nothing
the protection rule refuses: runtime files, templates, dot-files, and code in a whole-home
workspace), with capped sizes and no execute bit on what they write."""

from __future__ import annotations

import re

import pytest
import yaml

from agent.common.outcomes import UsageError
from agent.common.tags import Tag
from agent.config import load_settings
from agent.tools.files import MAX_LIST_ENTRIES, list_dir, read_file
from agent.tools.workspace import CODE_FOLDERS, DATA_SUFFIXES, READ_BY_NAME, RUNTIME_NAMES, ensure_workspace
from tests.helpers import REPO, tree_digest
from tests.tools.helpers import call, ctx_for


@pytest.fixture
def fhome(tmp_path):
    """A home with a file in its workspace, and a secret outside the home."""
    home = tmp_path / "home"
    (home / "scratchpad").mkdir(parents=True)
    (home / "scratchpad" / "active.yaml").write_text("notes: ''\n")
    (home / "workspace").mkdir()
    (home / "workspace" / "inside.txt").write_text("inside")
    (tmp_path / "secret.txt").write_text("s3cr3t")
    (tmp_path / "outdir").mkdir()
    return home


@pytest.fixture
def ws(fhome):
    """The workspace of `fhome`."""
    return fhome / "workspace"


@pytest.mark.parametrize(
    "tool, args",
    [
        ("read_file", {"path": "../secret.txt"}),
        ("read_file", {"path": "sub/../../secret.txt"}),
        ("write_file", {"path": "../evil.txt", "content": "x"}),
        ("append_file", {"path": "../secret.txt", "content": "x"}),
        ("list_dir", {"path": ".."}),
    ],
)
def test_file_tools_refuse_dot_dot_and_touch_nothing(fhome, tool, args):
    before = (fhome.parent / "secret.txt").read_text()
    kind, note = call(ctx_for(fhome), tool, **args)
    assert kind is Tag.TOOL_ERROR and "contains '..'" in note
    assert (fhome.parent / "secret.txt").read_text() == before and not (fhome.parent / "evil.txt").exists()


@pytest.mark.parametrize(
    "tool, extra",
    [("read_file", {}), ("write_file", {"content": "x"}), ("append_file", {"content": "x"}), ("list_dir", {})],
)
def test_file_tools_refuse_absolute_paths_outside_the_workspace(fhome, tool, extra):
    target = str(fhome.parent / ("outdir" if tool == "list_dir" else "secret.txt"))
    kind, note = call(ctx_for(fhome), tool, path=target, **extra)
    assert kind is Tag.TOOL_ERROR and "outside the workspace" in note
    assert (fhome.parent / "secret.txt").read_text() == "s3cr3t"


def test_absolute_paths_inside_the_workspace_are_fine(fhome, ws):
    assert call(ctx_for(fhome), "read_file", path=str(ws / "inside.txt"))[1].endswith("-> inside")


@pytest.mark.parametrize(
    "tool, path, extra",
    [
        ("read_file", "link.txt", {}),
        ("write_file", "link.txt", {"content": "x"}),
        ("append_file", "link.txt", {"content": "x"}),
        ("list_dir", "linkdir", {}),
        ("write_file", "linkdir/new.txt", {"content": "x"}),
    ],
)
def test_file_tools_refuse_symlinks_that_resolve_outside(fhome, ws, tool, path, extra):
    (ws / "link.txt").symlink_to(fhome.parent / "secret.txt")
    (ws / "linkdir").symlink_to(fhome.parent / "outdir")
    kind, note = call(ctx_for(fhome), tool, path=path, **extra)
    assert kind is Tag.TOOL_ERROR and "resolves through a symlink to" in note and "s3cr3t" not in note
    assert (fhome.parent / "secret.txt").read_text() == "s3cr3t" and list((fhome.parent / "outdir").iterdir()) == []


def test_symlinks_inside_the_workspace_are_followed(fhome, ws):
    (ws / "alias.txt").symlink_to(ws / "inside.txt")
    assert call(ctx_for(fhome), "read_file", path="alias.txt")[1].endswith("-> inside")


@pytest.mark.parametrize(
    "tool, extra", [("read_file", {}), ("write_file", {"content": "x"}), ("append_file", {"content": "x"})]
)
@pytest.mark.parametrize("path", ["scratchpad/active.yaml", "config.yaml", "rules.md", "agent/__init__.py"])
def test_by_default_nothing_outside_the_workspace_is_reachable_even_by_absolute_path(fhome, tool, extra, path):
    (fhome / "config.yaml").write_text("model: x\n")
    (fhome / "rules.md").write_text("rules\n")
    (fhome / "agent").mkdir()
    (fhome / "agent" / "__init__.py").write_text("")
    before = tree_digest(fhome)
    kind, note = call(ctx_for(fhome), tool, path=str(fhome / path), **extra)
    assert kind is Tag.TOOL_ERROR and "outside the workspace" in note
    assert tree_digest(fhome) == before


def test_a_relative_runtime_name_in_the_workspace_is_just_a_file_there(fhome, ws):
    assert call(ctx_for(fhome), "write_file", path="config.yaml", content="x")[0] is Tag.TOOL
    assert (ws / "config.yaml").read_text() == "x" and not (fhome / "config.yaml").exists()


@pytest.mark.parametrize(
    "path",
    [
        "scratchpad/active.yaml",
        "scratchpad/new.yaml",
        "logs/cycle_1.log",
        "config.yaml",
        ".agent.lock",
        "rules.md",
        "examples.yaml",
        "./scratchpad/x",
        "templates/default.yaml",
    ],
)
def test_runtime_files_and_templates_are_refused_even_in_a_whole_home_workspace(fhome, path):
    before = tree_digest(fhome)
    for tool, extra in (
        ("write_file", {"content": "forged"}),
        ("append_file", {"content": "forged"}),
        ("read_file", {}),
    ):
        kind, note = call(ctx_for(fhome, workspace="."), tool, path=path, **extra)
        assert kind is Tag.TOOL_ERROR and "belongs to the runtime" in note
    assert tree_digest(fhome) == before


def test_runtime_files_cannot_be_written_through_a_symlink_either(fhome):
    (fhome / "innocent.txt").symlink_to(fhome / "scratchpad" / "active.yaml")
    kind, note = call(ctx_for(fhome, workspace="."), "write_file", path="innocent.txt", content="forged")
    assert kind is Tag.TOOL_ERROR and "belongs to the runtime" in note
    assert (fhome / "scratchpad" / "active.yaml").read_text() == "notes: ''\n"


@pytest.mark.parametrize(
    "path", [".env", ".git/config", ".ssh/authorized_keys", ".bashrc", "sub/.hidden", ".venv/lib/x.pth"]
)
@pytest.mark.parametrize("workspace", ["workspace", "."])
def test_dot_files_are_refused_at_any_depth_in_any_workspace(fhome, path, workspace):
    before = tree_digest(fhome)
    for tool, extra in (("write_file", {"content": "x"}), ("append_file", {"content": "x"}), ("read_file", {})):
        kind, note = call(ctx_for(fhome, workspace=workspace), tool, path=path, **extra)
        assert kind is Tag.TOOL_ERROR and "dot-file" in note, note
    assert tree_digest(fhome) == before


def test_a_symlink_in_the_workspace_to_a_dot_file_in_it_is_refused(fhome, ws):
    (ws / ".env").write_text("KEY=sk-123")
    (ws / "plain.txt").symlink_to(ws / ".env")
    kind, note = call(ctx_for(fhome), "read_file", path="plain.txt")
    assert kind is Tag.TOOL_ERROR and "dot-file (.env)" in note and "sk-123" not in note


@pytest.mark.parametrize(
    "path, why",
    [
        ("agent/__init__.py", "Python package (agent)"),
        ("agent/cycle/run.txt", "Python package (agent)"),
        ("yaml.py", "code"),
        ("sitecustomize.py", "code"),
        ("usercustomize.pth", "code"),
        ("evil.pth", "code"),
        ("lib.so", "code"),
        ("bin/reset.sh", "code"),
        ("bin/tool", "folder of code (bin)"),
        ("Makefile", "code"),
        ("pyproject.toml", "code"),
        ("setup.py", "code"),
        ("setup.cfg", "code"),
        ("run.sh", "code"),
        ("newpkg/__init__.py", "code"),
        ("venv/lib/site-packages/x.txt", "folder of code"),
        ("x.egg-info/PKG-INFO", "folder of code"),
        ("tool", "executable file (tool)"),
        ("CLAUDE.md", "code"),
        ("requirements.txt", "code"),
        ("hook.js", "code"),
    ],
)
def test_a_whole_home_workspace_still_protects_code(fhome, path, why):
    (fhome / "agent").mkdir()
    (fhome / "agent" / "__init__.py").write_text("")
    (fhome / "tool").write_text("#!/bin/sh\n")
    (fhome / "tool").chmod(0o755)
    before = tree_digest(fhome)
    for tool, extra in (
        ("write_file", {"content": "import os"}),
        ("append_file", {"content": "import os"}),
        ("read_file", {}),
    ):
        kind, note = call(ctx_for(fhome, workspace="."), tool, path=path, **extra)
        assert kind is Tag.TOOL_ERROR and why in note, note
    assert tree_digest(fhome) == before


@pytest.mark.parametrize(
    "path",
    [
        # the reproduction
        "requirements-dev.txt",
        "build.rs",
        "docker-compose.yml",
        "Taskfile.yml",
        "analysis.ipynb",
        "conftest.PY",
        # more of the class: other tools, other depths, other cases
        "sub/package.json",
        "Cargo.toml",
        "Pipfile",
        "vite.config.ts",
        "deploy.Dockerfile",
        "GNUmakefile",
        "tools/build.gradle.kts",
        "CLAUDE.MD",
        "Agents.md",
        "docs/constraints.txt",
        "node_modules/x/readme.txt",
        "Node_Modules/y.csv",
        "Makefile.am",
        "notes.Sh",
        "settings.Json",
    ],
)
def test_a_whole_home_workspace_protects_every_file_a_tool_may_run_or_read_as_configuration(fhome, path):
    before = tree_digest(fhome)
    kind, note = call(ctx_for(fhome, workspace="."), "write_file", path=path, content="evil")
    assert kind is Tag.TOOL_ERROR and ("not a plain data file" in note or "folder of code" in note), note
    assert tree_digest(fhome) == before


@pytest.mark.parametrize("path", ["notes/today.TXT", "data.csv", "report.md", "plots/a.PNG", "events.jsonl"])
def test_plain_data_files_stay_writable_in_a_whole_home_workspace(fhome, path):
    assert call(ctx_for(fhome, workspace="."), "write_file", path=path, content="data")[0] is Tag.TOOL


def test_a_whole_home_workspace_allows_plain_files_and_lists_the_home(fhome):
    ctx = ctx_for(fhome, workspace=".")
    assert call(ctx, "write_file", path="notes/today.txt", content="hi")[0] is Tag.TOOL
    assert (fhome / "notes" / "today.txt").read_text() == "hi"
    assert "workspace/" in list_dir(ctx, ".")


def test_the_default_workspace_may_hold_code_files_but_never_with_an_exec_bit(fhome, ws):
    (ws / "run.sh").write_text("old")
    (ws / "run.sh").chmod(0o755)
    ctx = ctx_for(fhome)
    for tool in ("write_file", "append_file"):
        assert call(ctx, tool, path="run.sh", content="echo hi\n")[0] is Tag.TOOL
        assert call(ctx, tool, path="made.py", content="print(1)\n")[0] is Tag.TOOL
    for made in ("run.sh", "made.py"):
        assert (ws / made).stat().st_mode & 0o111 == 0


def test_a_configured_workspace_confines_file_tools_to_that_folder(fhome, ws):
    ctx = ctx_for(fhome, workspace="work")
    assert call(ctx, "write_file", path="a/b.txt", content="hi")[0] is Tag.TOOL
    assert (fhome / "work" / "a" / "b.txt").read_text() == "hi"
    kind, note = call(ctx, "read_file", path=str(ws / "inside.txt"))
    assert kind is Tag.TOOL_ERROR and "outside the workspace" in note


@pytest.mark.parametrize("workspace", ["../elsewhere", "/tmp", "", " "])
def test_a_workspace_outside_the_home_is_a_config_error(tmp_path, workspace):
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"workspace": workspace}))
    with pytest.raises(UsageError, match="setting 'workspace' must be a relative folder"):
        load_settings(tmp_path, env={})


def test_the_workspace_defaults_to_workspace_and_dot_is_the_whole_home(tmp_path):
    assert load_settings(tmp_path, env={}).workspace == "workspace"
    (tmp_path / "config.yaml").write_text("workspace: .\n")
    assert ctx_for(tmp_path, workspace=load_settings(tmp_path, env={}).workspace).workspace == tmp_path.resolve()


@pytest.mark.parametrize("workspace", ["scratchpad", "templates", ".git", "logs/sub"])
def test_a_workspace_naming_a_runtime_folder_or_dot_folder_is_refused(fhome, workspace):
    (fhome / workspace).mkdir(parents=True, exist_ok=True)
    before = tree_digest(fhome)
    kind, note = call(ctx_for(fhome, workspace=workspace), "write_file", path="x.txt", content="x")
    assert kind is Tag.TOOL_ERROR and "fix 'workspace' in config.yaml" in note
    assert tree_digest(fhome) == before
    assert ensure_workspace(fhome, ctx_for(fhome, workspace=workspace).settings) is None


def test_a_workspace_symlinked_out_of_the_home_is_refused(fhome):
    (fhome / "work").symlink_to(fhome.parent / "outdir")
    kind, note = call(ctx_for(fhome, workspace="work"), "write_file", path="x.txt", content="x")
    assert kind is Tag.TOOL_ERROR and "outside the home" in note
    assert list((fhome.parent / "outdir").iterdir()) == []
    assert ensure_workspace(fhome, ctx_for(fhome, workspace="work").settings) is None


def test_read_file_is_capped_with_a_marker(fhome, ws):
    (ws / "big.txt").write_text("a" * 1000)
    out = read_file(ctx_for(fhome, file_max_read=10), "big.txt")
    assert out == "a" * 10 + "\n[file is 1000 bytes; only the first 10 were read]"


def test_oversized_writes_and_appends_are_refused_and_change_nothing(fhome, ws):
    ctx = ctx_for(fhome, file_max_write=10)
    kind, note = call(ctx, "write_file", path="inside.txt", content="x" * 11)
    assert kind is Tag.TOOL_ERROR and "11 bytes, over the 10-byte limit" in note
    kind, note = call(ctx, "append_file", path="inside.txt", content="12345")
    assert kind is Tag.TOOL_ERROR and "would be 11 bytes, over the 10-byte limit" in note
    assert (ws / "inside.txt").read_text() == "inside"


def test_write_file_replaces_the_whole_file_and_leaves_no_temp_file(fhome, ws):
    assert call(ctx_for(fhome), "write_file", path="inside.txt", content="new")[1].endswith(
        "-> wrote 3 bytes to inside.txt"
    )
    assert (ws / "inside.txt").read_text() == "new"
    assert sorted(p.name for p in ws.iterdir()) == ["inside.txt"]


def test_append_file_creates_the_file_then_appends_to_it(fhome, ws):
    ctx = ctx_for(fhome)
    assert call(ctx, "append_file", path="log/j.txt", content="one\n")[0] is Tag.TOOL
    kind, note = call(ctx, "append_file", path="log/j.txt", content="two\n")
    assert kind is Tag.TOOL and "now 8 bytes" in note
    assert (ws / "log" / "j.txt").read_text() == "one\ntwo\n"


def test_list_dir_shows_folders_symlinks_and_sizes_and_caps_entries(fhome, ws):
    (ws / "alias").symlink_to(ws / "inside.txt")
    (ws / "sub").mkdir()
    out = list_dir(ctx_for(fhome))
    assert out.splitlines() == ["alias@", "inside.txt (6 bytes)", "sub/"]
    many = ws / "many"
    many.mkdir()
    for i in range(MAX_LIST_ENTRIES + 5):
        (many / f"f{i:04d}").touch()
    assert list_dir(ctx_for(fhome), "many").endswith("\n[5 more entries not shown]")


@pytest.mark.parametrize(
    "tool, args, why",
    [
        ("read_file", {"path": "nope.txt"}, "no such file"),
        ("read_file", {"path": ""}, "empty"),
        ("list_dir", {"path": "inside.txt"}, "no such folder"),
        ("write_file", {"path": "scratchpad", "content": ""}, "outside the workspace"),
    ],
)
def test_file_tool_bad_paths_are_explained(fhome, ws, tool, args, why):
    (ws / "scratchpad").symlink_to(fhome / "scratchpad")
    kind, note = call(ctx_for(fhome), tool, **args)
    assert kind is Tag.TOOL_ERROR and why in note


def test_the_reference_lists_exactly_what_the_protection_rule_refuses():
    reference = (REPO / "docs" / "reference.md").read_text()
    table = reference.split("### The workspace")[1].split("### The shell")[0]
    listed = set(re.findall(r"[\w.*-]+", table.replace("`", " ")))
    for name in sorted(RUNTIME_NAMES | CODE_FOLDERS) + list(READ_BY_NAME):
        assert name in listed or f"{name}/" in table or f"{name}.*" in table, name
    documented = set(table.split("names ending in `")[1].split("`")[0].split())
    assert documented == set(DATA_SUFFIXES)
