"""The `agent` group: every command in the lazy map, loaded only when used, none importing upward."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

import agent.cli
from agent.cli import COMMANDS, main
from agent.common.outcomes import ExitCode
from tests.helpers import run_cli

CLI_PACKAGE = Path(agent.cli.__file__).parent


def leaf_commands() -> list[tuple[str, click.Command]]:
    """(name, command) for every command a user can run, subcommands of groups included."""
    ctx = click.Context(main)
    found = []
    for name in main.list_commands(ctx):
        command = main.get_command(ctx, name)
        if isinstance(command, click.Group):
            found += [(f"{name} {sub}", command.get_command(ctx, sub)) for sub in command.list_commands(ctx)]
        else:
            found.append((name, command))
    return found


def modules_loaded_by(code: str) -> set[str]:
    """The agent.* modules a fresh interpreter has loaded after running `code`."""
    probe = f"import sys\n{code}\nprint(' '.join(m for m in sys.modules if m.startswith('agent')))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return set(proc.stdout.split())


def test_agent_help_lists_every_command_in_the_map():
    result = run_cli("--help")
    assert result.exit_code == 0
    listed = re.findall(r"^  (\w+) ", result.stdout.split("Commands:")[1], re.MULTILINE)
    assert listed == sorted(COMMANDS)


def test_the_help_names_every_exit_code():
    assert {int(code) for code in re.findall(r"(\d+) [a-z]", main.help.split("Exit codes:")[1])} == set(
        map(int, ExitCode)
    )


def test_every_command_has_help_text_and_json_output():
    commands = leaf_commands()
    assert len(commands) == len(COMMANDS) - 2 + 6  # task and goal each hold add, list and drop
    for name, command in commands:
        assert command.help, name
        assert any(p.name == "as_json" for p in command.params), name


def test_importing_the_cli_loads_no_command_module():
    assert modules_loaded_by("import agent.cli") == {"agent", "agent.cli"}


@pytest.mark.parametrize("name", ["run", "status", "task", "doctor"])
def test_using_a_command_loads_its_own_module_and_no_other_command_module(name):
    loaded = modules_loaded_by(f"from agent.cli import main\nmain([{name!r}, '--help'], standalone_mode=False)")
    own = COMMANDS[name].partition(":")[0]
    others = {target.partition(":")[0] for target in COMMANDS.values()} - {own}
    assert own in loaded and not loaded & others


def test_no_command_module_imports_the_cli_package():
    for path in CLI_PACKAGE.glob("*.py"):
        if path.name == "__init__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert not (node.level == 1 and node.module is None), f"{path.name}: from . import ..."
                assert node.module != "agent.cli", f"{path.name}: from agent.cli import ..."
            elif isinstance(node, ast.Import):
                assert all(alias.name != "agent.cli" for alias in node.names), f"{path.name}: import agent.cli"
