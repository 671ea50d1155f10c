"""Tool plugins: installed distributions add tools through the `agent.tools` entry points;
broken ones are reported once and skipped, and never stop a cycle."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import tomllib

from agent.config import Settings
from agent.tools import build_registry, plugins
from tests.helpers import REPO, install_dist, read_yaml, run_agent_process, run_cli, tree_digest, write_script
from tests.tools.helpers import call, ctx_for

PLUGIN_SRC = REPO / "tests" / "plugin_example"


def make_dist(site: Path, name: str, entry_points: dict[str, str], modules: dict[str, str] | None = None) -> None:
    """Install a tool plugin by hand (tests/helpers.py, `install_dist`)."""
    install_dist(site, name, "agent.tools", entry_points, modules)


def install_example_plugin(site: Path) -> None:
    """tests/plugin_example, installed the way pip would lay it out (entry points from its pyproject)."""
    meta = tomllib.loads((PLUGIN_SRC / "pyproject.toml").read_text())
    make_dist(site, meta["project"]["name"], meta["project"]["entry-points"]["agent.tools"])
    shutil.copytree(PLUGIN_SRC / "agent_plugin_example", site / "agent_plugin_example")


BROKEN = {
    "broken-import": (
        {"oops": "broken_plugin_mod:tool"},
        {"broken_plugin_mod": "raise ImportError('no numpy here')\n"},
    ),
    "broken-object": ({"thing": "broken_plugin_obj:VALUE"}, {"broken_plugin_obj": "VALUE = 42\n"}),
    "broken-nodoc": ({"nodoc": "broken_plugin_nodoc:f"}, {"broken_plugin_nodoc": "def f(x: str):\n    return x\n"}),
    "broken-clash": (
        {"clash": "broken_plugin_clash:shell"},
        {"broken_plugin_clash": "def shell(command: str) -> str:\n    '''Pretend.'''\n    return 'x'\n"},
    ),
    "broken-missing": ({"gone": "no_such_module_anywhere:tool"}, {}),
}


@pytest.fixture
def site(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    for module in ["agent_plugin_example", *(m for _, mods in BROKEN.values() for m in mods)]:
        monkeypatch.delitem(sys.modules, module, raising=False)
    return site


def test_the_example_plugin_adds_its_tools_with_their_source(site, tmp_path):
    install_example_plugin(site)
    warnings = []
    registry = build_registry(Settings(), warn=warnings.append)
    assert warnings == []
    assert registry.names()[-5:] == ["shout", "count_words", "repeat", "update_scratchpad", "done"]
    assert {registry[n].source for n in ("shout", "count_words", "repeat")} == {"plugin:agent-plugin-example"}
    assert registry["repeat"].signature() == "repeat(text: string, times?: integer)"
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "words.txt").write_text("one two three")
    ctx = ctx_for(tmp_path)
    assert call(ctx, "shout", registry, text="hey")[1].endswith("-> HEY")
    assert call(ctx, "count_words", registry, path="words.txt")[1].endswith("-> 3 words in words.txt")
    assert "contains '..'" in call(ctx, "count_words", registry, path="../x")[1]
    assert "raised ValueError: times must be between 1 and 10" in call(ctx, "repeat", registry, text="a", times=99)[1]


def test_broken_plugins_are_reported_and_skipped(site):
    install_example_plugin(site)
    for name, (eps, modules) in BROKEN.items():
        make_dist(site, name, eps, modules)
    warnings = []
    registry = build_registry(Settings(), warn=warnings.append)
    assert "shout" in registry and registry["shell"].source == "built-in"
    report = "\n".join(warnings)
    assert len(warnings) == 5
    assert (
        "plugin broken-import (entry point 'oops = broken_plugin_mod:tool') skipped: ImportError: no numpy here"
        in report
    )
    assert (
        "plugin broken-object" in report
        and "must name a function, a Tool or a list of them, got the number 42" in report
    )
    assert "plugin broken-nodoc" in report and "needs a docstring" in report
    assert "plugin broken-clash" in report and "tool 'shell' skipped: a tool with that name already exists" in report
    assert "plugin broken-missing" in report and "ModuleNotFoundError" in report
    assert registry.problems == warnings


def test_an_entry_point_naming_no_tool_is_skipped_saying_what_it_names_in_words(site, home, monkeypatch):
    """The warning names the value (`the number 42`), never Python's type name for it (`int`)."""
    monkeypatch.setattr(plugins, "_reported", set())
    make_dist(site, "broken-object", *BROKEN["broken-object"])
    before = tree_digest(home)
    result = run_cli("tools", "--home", str(home))
    assert result.exit_code == 0
    assert result.stderr.splitlines() == [
        "agent: warning: plugin broken-object (entry point 'thing = broken_plugin_obj:VALUE') skipped: "
        "the entry point must name a function, a Tool or a list of them, got the number 42"
    ]
    assert tree_digest(home) == before


def test_a_plugin_problem_is_printed_on_stderr_once_per_process(monkeypatch, capsys):
    monkeypatch.setattr(plugins, "_reported", set())
    plugins.warn_once("plugin x skipped: boom")
    plugins.warn_once("plugin x skipped: boom")
    assert capsys.readouterr().err == "agent: warning: plugin x skipped: boom\n"


def test_plugins_disabled_skips_a_plugin_or_all(site):
    install_example_plugin(site)
    make_dist(site, "broken-import", *BROKEN["broken-import"])
    warnings = []
    registry = build_registry(Settings(plugins_disabled=["broken-import"]), warn=warnings.append)
    assert "shout" in registry and warnings == []
    registry = build_registry(Settings(plugins_disabled=["*"]), warn=warnings.append)
    assert "shout" not in registry and "broken_plugin_mod" not in sys.modules and warnings == []


def test_plugin_tools_can_be_disabled_like_any_tool(site):
    install_example_plugin(site)
    registry = build_registry(Settings(tools_disabled=["shout"]))
    assert "shout" not in registry and "repeat" in registry


def test_agent_tools_lists_each_tool_with_its_arguments_and_source(site, home):
    install_example_plugin(site)
    (home / "config.yaml").write_text("tools_disabled: [http_get]\n")
    result = run_cli("tools", "--home", str(home))
    assert result.exit_code == 0
    assert "shout  [plugin:agent-plugin-example]" in result.stdout
    assert "    - times (integer, optional): how many times (1 to 10)" in result.stdout
    assert "read_file  [built-in]" in result.stdout and "done  [control]" in result.stdout
    assert "turned off by config: http_get" in result.stdout
    listed = json.loads(run_cli("tools", "--home", str(home), "--json").stdout)
    by_name = {t["name"]: t for t in listed}
    assert by_name["shout"]["source"] == "plugin:agent-plugin-example" and "http_get" not in by_name
    assert by_name["write_file"]["arguments"][0] == {
        "name": "path",
        "type": "string",
        "required": True,
        "description": 'a path relative to the workspace, e.g. "hello.txt"',
    }


def test_the_example_plugin_works_end_to_end_in_a_real_cycle_despite_a_broken_plugin(tmp_path):
    site = tmp_path / "site"
    install_example_plugin(site)
    make_dist(site, "broken-import", *BROKEN["broken-import"])
    home = tmp_path / "home"
    (home / "scratchpad").mkdir(parents=True)
    script = write_script(
        tmp_path,
        [
            {"tool": "shout", "args": {"text": "plugins work"}},
            {"tool": "repeat", "args": {"text": "ok", "times": 3}},
            {"tool": "done", "args": {"summary": "used the plugin"}},
        ],
    )
    env = {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    proc = run_agent_process("run", "--home", str(home), "--model", f"scripted:{script}", env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("agent: warning: plugin broken-import") == 1
    notes = read_yaml(home / "scratchpad" / "active.yaml")["notes"]
    assert '[TOOL] shout({"text": "plugins work"}) -> PLUGINS WORK' in notes
    assert "-> ok ok ok" in notes and "[COMPLETED] used the plugin" in notes
