"""The docs agree with the code: exit codes, the default rules, the settings table."""

from __future__ import annotations

import re
import subprocess

from agent.docs import with_settings_table
from agent.outcomes import ExitCode
from agent.prompt import default_rules
from agent.providers.local_worker import PORTABLE_CMAKE_ARGS
from tests.helpers import REPO


def test_exit_code_table_in_claude_md_matches_the_code():
    text = (REPO / "CLAUDE.md").read_text()
    documented = {int(code) for code in re.findall(r"^\| (\d+) \|", text, re.MULTILINE)}
    assert documented == {int(code) for code in ExitCode}


def test_root_rules_md_is_the_packaged_default():
    assert (REPO / "rules.md").read_text() == default_rules()


def test_readme_settings_table_lists_every_setting_with_its_default():
    readme = (REPO / "README.md").read_text()
    assert readme == with_settings_table(readme), "run: python -m agent.docs --write"


def _readme_setup_block() -> list[str]:
    readme = (REPO / "README.md").read_text()
    after_marker = readme[readme.index("\n<!-- set-up"):]
    return re.search(r"\n```sh\n(.*?)\n```\n", after_marker, re.DOTALL).group(1).splitlines()


def test_ci_runs_the_readme_set_up_block_as_it_is_and_installs_nothing_else():
    printed = subprocess.run(["bash", str(REPO / ".ci" / "readme-setup")], capture_output=True, text=True, check=True)
    assert printed.stdout.splitlines() == _readme_setup_block()
    ci = (REPO / ".ci" / "run").read_text()
    assert "bash .ci/readme-setup" in ci and 'eval "$line"' in ci
    assert "pip install" not in ci and "CMAKE_ARGS" not in ci  # the README's commands alone


def test_the_readme_set_up_builds_the_pinned_runtime_portable_without_pips_cache():
    block = "\n".join(_readme_setup_block())
    assert "apt-get install -y" in block and "bubblewrap" in block and "git" in block  # the sandbox; the MCP tests
    assert f"CMAKE_ARGS=\"{PORTABLE_CMAKE_ARGS}\" pip install --no-cache-dir -e '.[local]'" in block
    assert "python -m pytest" in block
    local = re.search(r"^local = \[(.*)\]$", (REPO / "pyproject.toml").read_text(), re.MULTILINE).group(1)
    assert re.search(r'"llama-cpp-python\[server\]==\d+\.\d+\.\d+"', local), local  # a tested version, no other
