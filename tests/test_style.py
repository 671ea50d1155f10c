"""The code's form is the formatter's and the linter's business, not a line cap's: both run over the
repository with the settings in pyproject.toml ([tool.ruff]), and any finding fails the suite."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import REPO

PATHS = ["agent", "tests", "bench"]


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", *args, *PATHS], cwd=REPO, capture_output=True, text=True)


@pytest.fixture(scope="module", autouse=True)
def _ruff_installed():
    probe = subprocess.run([sys.executable, "-m", "ruff", "--version"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.fail("ruff is not installed: pip install -e '.[test]'", pytrace=False)


def test_the_code_is_formatted():
    result = _ruff("format", "--check")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_linter_finds_nothing():
    result = _ruff("check")
    assert result.returncode == 0, result.stdout + result.stderr
