"""build_registry: built-ins, then plugins, then the control tools, filtered by config."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from agent.common.outcomes import UsageError
from agent.config import Settings, load_settings
from agent.cycle import prompt
from agent.tools import CONTROL_TOOLS, build_registry
from tests.helpers import REPO, read_yaml, run_cli, write_script

BUILT_IN = ["echo", "shell", "read_file", "write_file", "append_file", "list_dir", "http_get", "recall"]


def test_a_cycle_offers_the_built_in_tools_then_the_control_tools_in_that_order():
    registry = build_registry(Settings(), entry_points=[])
    assert registry.names() == BUILT_IN + list(CONTROL_TOOLS)
    assert registry.disabled == [] and registry.problems == []
    assert {registry[name].source for name in BUILT_IN} == {"built-in"}


def test_a_disabled_tool_is_not_offered_and_not_run(home, tmp_path):
    (home / "config.yaml").write_text(yaml.safe_dump({"tools_disabled": ["echo", "http_get"]}))
    script = write_script(
        tmp_path, [{"tool": "echo", "args": {"message": "hi"}}, {"tool": "done", "args": {"summary": "s"}}]
    )
    result = run_cli("run", "--home", str(home), "--model", f"scripted:{script}")
    assert result.exit_code == 0
    notes = read_yaml(home / "scratchpad" / "active.yaml")["notes"]
    assert "[UNKNOWN TOOL] echo" in notes and "[TOOL] echo" not in notes
    registry = build_registry(load_settings(home, env={}))
    system = prompt.system_prompt(prompt.read_rules(home / "rules.md"), registry)
    assert "echo(" not in system and "http_get(" not in system and "read_file(" in system
    offered = [option["properties"]["tool"]["const"] for option in registry.action_schema()["anyOf"]]
    assert "echo" not in offered and "http_get" not in offered and offered[-2:] == ["update_scratchpad", "done"]


def test_tools_enabled_keeps_only_the_named_tools_and_the_control_tools():
    registry = build_registry(Settings(tools_enabled=["read_file"]), entry_points=[])
    assert registry.names() == ["read_file", "update_scratchpad", "done"]
    assert "shell" in registry.disabled


def test_the_control_tools_cannot_be_disabled(tmp_path):
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"tools_disabled": ["done"]}))
    with pytest.raises(UsageError, match="'done' cannot be disabled"):
        load_settings(tmp_path, env={})


# ---------------------------------------------------------------------------------------- layers

TOOLS_PACKAGE = REPO / "agent" / "tools"


def _imported_siblings(module: Path) -> set[str]:
    """The agent.tools modules a module imports (at any level of the code)."""
    found = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("agent.tools."):
            found.add(node.module.split(".")[2])
        elif isinstance(node, ast.ImportFrom) and node.module == "agent.tools":
            found |= {alias.name for alias in node.names if (TOOLS_PACKAGE / f"{alias.name}.py").exists()}
    return found


def test_base_imports_no_tool_and_only_the_package_init_imports_the_registry():
    imports = {path.stem: _imported_siblings(path) for path in TOOLS_PACKAGE.glob("*.py")}
    assert imports["base"] == set()
    assert [name for name, imported in imports.items() if "registry" in imported] == ["__init__"]
    assert imports["registry"] >= {"base", "builtin", "plugins"}


def test_building_a_registry_imports_no_http_client():
    probe = (
        "import sys\nfrom agent.config import Settings\nfrom agent.tools import build_registry\n"
        "build_registry(Settings(), entry_points=[])\nprint(sorted(m for m in sys.modules if m.startswith('httpx')))"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"
