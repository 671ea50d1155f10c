"""The docs agree with the code: exit codes, the default rules, the settings table."""

from __future__ import annotations

import re

from agent.docs import with_settings_table
from agent.outcomes import ExitCode
from agent.prompt import default_rules
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
