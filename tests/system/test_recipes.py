"""The deployment recipes in docs/operations.md against their platforms' own checks, taken from the
page as an operator copies them: the systemd units through `systemd-analyze verify` and `security
--offline` (Debian's systemd), whose exposure figure the page states; the Kubernetes manifests
through checkov (from the package index, in an environment of its own: tests/tool_venvs.py), whose
still-failing checks the page lists with their reasons."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

OPERATIONS = Path(__file__).parents[2] / "docs" / "operations.md"
AGENT = Path(sys.executable).parent / "agent"  # the venv's own program, for verify's "is it executable"


def fenced_after(text: str, marker: str, language: str) -> str:
    """The first ```language block after the line holding `marker`."""
    rest = text[text.index(marker) :]
    block = re.search(rf"^```{language}\n(.*?)^```$", rest, re.MULTILINE | re.DOTALL)
    assert block, f"no ```{language} block after {marker!r}"
    return block.group(1)


def systemd_analyze() -> str:
    found = shutil.which("systemd-analyze")
    if found is None:
        why = "systemd-analyze is not installed (Debian's systemd package)"
        if os.environ.get("CI"):
            pytest.fail(f"CI must run this test, but {why}", pytrace=False)
        pytest.skip(why)
    return found


@pytest.fixture
def units(tmp_path: Path) -> Path:
    """The page's units, as files named as the page names them (the service's program made one
    that exists here: verify checks that it is executable)."""
    text = OPERATIONS.read_text()
    for name in ("agent.service", "agent.timer", "agent-alert@.service"):
        unit = fenced_after(text, f"`/etc/systemd/system/{name}`", "ini")
        (tmp_path / name).write_text(unit.replace("/opt/agent/venv/bin/agent", str(AGENT)))
    (tmp_path / "agent-alert@agent.service.service").write_text((tmp_path / "agent-alert@.service").read_text())
    return tmp_path


def test_the_documented_units_pass_systemd_analyze_verify(units):
    names = ["agent.service", "agent.timer", "agent-alert@agent.service.service"]
    done = subprocess.run([systemd_analyze(), "verify", *names], cwd=units, capture_output=True, text=True)
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr


def test_the_service_sets_the_sandbox_policy_so_a_hardening_that_stops_bwrap_is_loud(units):
    assert "Environment=AGENT_SHELL_POLICY=sandbox" in (units / "agent.service").read_text().splitlines()


def test_the_services_exposure_is_the_figure_the_docs_give_and_at_most_5(units):
    done = subprocess.run(
        [systemd_analyze(), "security", "--offline=true", "./agent.service"], cwd=units, capture_output=True, text=True
    )
    measured = re.search(r"Overall exposure level for agent\.service: (\d+\.\d)", done.stdout)
    assert measured, done.stdout[-500:] + done.stderr
    documented = re.search(r"rates it\s+\*\*(\d+\.\d)\*\*", OPERATIONS.read_text())
    assert documented and documented.group(1) == measured.group(1)
    assert float(measured.group(1)) <= 5.0
