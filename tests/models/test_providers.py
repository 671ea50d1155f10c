"""Model providers by entry point: an installed package that declares an `agent.models` entry point
adds a provider, as the agent declares its own three; a broken, clashing or unknown one is exit 2
with one line, and finding the chosen one imports no other provider's code."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from agent.common.entry_points import declared, parse
from agent.models.resolve import GROUP, providers
from tests.helpers import REPO, install_dist, read_active, run_agent_process, run_cli, tree_digest, write_active

EXAMPLE = REPO / "tests" / "provider_example"


def install_example_provider(site: Path) -> None:
    """tests/provider_example, installed the way pip would lay it out (entry points from its pyproject)."""
    meta = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())
    install_dist(site, meta["project"]["name"], GROUP, meta["project"]["entry-points"][GROUP])
    shutil.copytree(EXAMPLE / "agent_provider_example", site / "agent_provider_example")


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A folder on sys.path (this process's, and PYTHONPATH for the processes it starts)."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    for module in [m for m in sys.modules if m.startswith(("agent_provider_example", "broken_provider"))]:
        monkeypatch.delitem(sys.modules, module)
    return site


@pytest.fixture
def task_home(home: Path) -> Path:
    write_active(home, {"goals": ["g"], "current_task": "greet", "pending_actions": []})
    return home


def with_path(site: Path) -> dict:
    return {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}


def test_the_agent_declares_its_own_providers_as_a_plugin_would():
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert meta["project"]["entry-points"][GROUP] == {
        "scripted": "agent.models.scripted:provider",
        "openai": "agent.models.openai.compat:provider",
        "local": "agent.models.local.model:provider",
    }
    assert {name: [p.dist for p in points] for name, points in providers().items()} == {
        "local": ["scratchpad-agent"],
        "openai": ["scratchpad-agent"],
        "scripted": ["scratchpad-agent"],
    }


def test_a_provider_installed_from_a_package_runs_a_real_cycle(site, task_home):
    install_example_provider(site)
    result = run_agent_process(
        "run",
        "--home",
        str(task_home),
        "--model",
        "parrot:hello",
        "--json",
        env={**with_path(site), "PARROT_GREETING": "hi"},
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["model"] == "parrot:hello" and report["stop_reason"] == "done" and report["iterations"] == 2
    state = read_active(task_home)
    assert state["completed_tasks"] == [{"task": "greet", "summary": "said hello"}]
    assert "[TOOL] echo" in state["notes"] and "hi hello" in state["notes"]
    log = next((task_home / "logs").glob("cycle_*.log")).read_text()
    assert "parrot hello ready" in log  # its start() got the cycle's log


def test_the_installed_providers_are_named_when_one_is_unknown(site, task_home):
    install_example_provider(site)
    digest = tree_digest(task_home)
    result = run_cli("run", "--home", str(task_home), "--model", "claude:x")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "agent: error: unknown model provider 'claude' (installed providers: local, openai, parrot, scripted)"
    ]
    assert tree_digest(task_home) == digest


def test_a_provider_that_refuses_its_settings_is_exit_2_with_its_own_line(site, task_home):
    install_example_provider(site)
    digest = tree_digest(task_home)
    result = run_cli("run", "--home", str(task_home), "--model", "parrot")
    assert (
        result.exit_code == 2
        and result.stderr.strip() == "agent: error: parrot: needs a word, e.g. --model parrot:hello"
    )
    assert tree_digest(task_home) == digest


BROKEN = {
    "broken-import": (
        {"brittle": "broken_provider_import:provider"},
        {"broken_provider_import": "raise ImportError('no torch here')\n"},
        "model provider 'brittle' (package broken-import, 'broken_provider_import:provider') cannot be loaded: "
        "ImportError: no torch here",
    ),
    "broken-missing": (
        {"brittle": "broken_provider_missing:nothing"},
        {"broken_provider_missing": "VALUE = 1\n"},
        "cannot be loaded: AttributeError:",
    ),
    "broken-object": (
        {"brittle": "broken_provider_object:VALUE"},
        {"broken_provider_object": "VALUE = 42\n"},
        "model provider 'brittle' (package broken-object) names broken_provider_object:VALUE, which is not callable",
    ),
    "broken-model": (
        {"brittle": "broken_provider_model:provider"},
        {"broken_provider_model": "def provider(choice):\n    return 'a string'\n"},
        "model provider 'brittle' made the text \"a string\", not a model (no name, start, complete)",
    ),
    "broken-raises": (
        {"brittle": "broken_provider_raises:provider"},
        {"broken_provider_raises": "def provider(choice):\n    raise KeyError('base_url')\n"},
        "model provider 'brittle' failed: KeyError: 'base_url'",
    ),
}


@pytest.mark.parametrize("dist", sorted(BROKEN))
def test_a_broken_provider_is_exit_2_with_one_line_and_nothing_written(site, task_home, dist):
    entry_points, modules, message = BROKEN[dist]
    install_dist(site, dist, GROUP, entry_points, modules)
    digest = tree_digest(task_home)
    result = run_cli("run", "--home", str(task_home), "--model", "brittle:x")
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert message in line and "Traceback" not in result.output
    assert tree_digest(task_home) == digest


def test_a_provider_that_makes_an_object_of_its_own_says_so_without_its_python_type(site, task_home):
    modules = {"broken_provider_made": "class Gadget:\n    pass\n\ndef provider(choice):\n    return Gadget()\n"}
    install_dist(site, "broken-made", GROUP, {"brittle": "broken_provider_made:provider"}, modules)
    digest = tree_digest(task_home)
    result = run_cli("run", "--home", str(task_home), "--model", "brittle:x")
    assert result.exit_code == 2
    assert result.stderr == (
        "agent: error: model provider 'brittle' made a value of another kind, not a model (no name, start, complete)\n"
    )
    assert tree_digest(task_home) == digest


def test_two_packages_declaring_one_provider_is_exit_2_naming_both(site, task_home):
    install_dist(site, "shadow-openai", GROUP, {"openai": "shadow_openai:provider"}, {"shadow_openai": "x = 1\n"})
    result = run_cli("run", "--home", str(task_home), "--model", "openai:gpt-4o-mini")
    assert result.exit_code == 2
    assert "model provider 'openai' is declared by more than one package (" in result.stderr
    assert "scratchpad-agent" in result.stderr and "shadow-openai" in result.stderr
    assert "shadow_openai" not in sys.modules  # refused before anything of it was imported


def test_finding_the_chosen_provider_imports_no_other_providers_code(site, task_home, tmp_path):
    install_example_provider(site)
    script = tmp_path / "replies.yaml"
    script.write_text(json.dumps([{"tool": "done", "args": {"summary": "ok"}}]))
    probe = (
        "import atexit, json, sys\n"
        "atexit.register(lambda: print('LOADED', json.dumps(sorted(sys.modules))))\n"
        f"sys.argv = ['agent', 'run', '--home', {str(task_home)!r}, '--model', 'scripted:{script}']\n"
        "from agent.cli import entry\n"
        "entry()\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env={**os.environ, **with_path(site)}
    )
    assert proc.returncode == 0, proc.stderr
    loaded = set(json.loads(proc.stdout.split("LOADED ", 1)[1]))
    assert "agent.models.scripted" in loaded
    assert not loaded & {"agent_provider_example", "agent.models.openai.compat", "agent.models.local.model"}
    assert not loaded & {"importlib.metadata", "email"}


def test_entry_points_are_read_as_importlib_reads_them(tmp_path):
    text = (
        "# a comment\n[agent.models]\nparrot = agent_provider_example:provider [extra]\n\n[console_scripts]\nx = y:z\n"
    )
    [point] = [p for p in parse(text, "d") if p.group == "agent.models"]
    assert (point.name, point.value) == ("parrot", "agent_provider_example:provider")
    first, second = tmp_path / "first", tmp_path / "second"
    install_dist(first, "same-dist", GROUP, {"one": "m:a"})
    install_dist(second, "same_dist", GROUP, {"two": "m:b"})  # the same distribution, further along the path
    assert [p.name for p in declared(GROUP, [str(first), str(second)])] == ["one"]
    assert declared(GROUP, [str(tmp_path / "missing"), str(first / "same_dist-0.1.0.dist-info" / "METADATA")]) == []


def test_a_package_installed_after_a_first_read_is_found_at_once(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    assert declared(GROUP, [str(site)]) == []
    install_dist(site, "later", GROUP, {"late": "m:p"})  # at once: within the clock's resolution
    assert [p.name for p in declared(GROUP, [str(site)])] == ["late"]
