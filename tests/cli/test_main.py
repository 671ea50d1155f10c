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
            found += [(name, command)] if command.invoke_without_command else []  # `agent memory` shows, too
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
    listed = re.findall(r"^  ([\w-]+) ", result.stdout.split("Commands:")[1], re.MULTILINE)
    assert listed == sorted(COMMANDS)


def test_the_help_names_every_exit_code():
    assert {int(code) for code in re.findall(r"(\d+) [a-z]", main.help.split("Exit codes:")[1])} == set(
        map(int, ExitCode)
    )


def test_every_command_has_help_text_and_json_output():
    commands = leaf_commands()
    # task and goal each hold add, list and drop; memory holds add, drop and set, and shows the sections itself
    assert len(commands) == len(COMMANDS) - 3 + 6 + 3 + 1
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


# ------------------------------------------------------------------ exit 2 under --quiet: one line


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--bogus", "-q"],
        ["run", "--quiet", "--max-iterations", "0"],
        ["run", "-q", "--wait", "soon"],
        ["task", "add", "-q"],  # a missing argument
        ["status", "-q"],  # a command without --quiet: still one line
        ["history", "-q", "--limit", "x"],
        ["-q", "status"],  # the group's own options
        ["-q", "no-such-command"],
    ],
)
def test_a_usage_error_under_quiet_is_one_line_for_every_command(home, args):
    result = run_cli(*args, "--home", str(home)) if args[0] != "-q" else run_cli(*args)
    assert result.exit_code == 2
    assert result.stdout == "" and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("agent: error: ") and "--help` lists the options)" in result.stderr


def test_without_quiet_a_usage_error_keeps_clicks_usage_lines(home):
    result = run_cli("run", "--bogus", "--home", str(home))
    assert result.exit_code == 2 and result.stderr.startswith("Usage: ") and "Error: No such option" in result.stderr


def test_no_model_configured_under_quiet_is_one_line_naming_both_remedies(home, monkeypatch):
    import agent.models.local.model

    monkeypatch.setattr(agent.models.local.model, "bundled_model_path", lambda: None)
    for args in (["-q"], ["--quiet", "--bogus"]):
        result = run_cli("run", "--home", str(home), *args)
        assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    result = run_cli("run", "--home", str(home), "-q")
    assert result.stderr.startswith("agent: error: no model is configured and the embedded model is not installed.")
    assert "pip install" in result.stderr and "--model openai:gpt-4o-mini" in result.stderr
    assert not (home / "logs").exists()
    # a person at a terminal keeps the remedies on lines of their own
    assert run_cli("run", "--home", str(home)).stderr.count("\n") == 4


def test_quiet_is_found_among_short_flags_and_never_after_a_double_dash():
    from agent.cli import quiet_asked

    assert quiet_asked(["run", "-q"]) and quiet_asked(["run", "--quiet"]) and quiet_asked(["task", "-yq"])
    assert not quiet_asked(["run"]) and not quiet_asked(["task", "add", "--", "-q"])
    assert not quiet_asked(["task", "add", "--quietly"])
