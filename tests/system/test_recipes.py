"""The deployment recipes in docs/operations.md against their platforms' own checks, taken from the
page as an operator copies them: the systemd units through `systemd-analyze verify` and `security
--offline` (Debian's systemd), whose exposure figure the page states; the Kubernetes manifests
through checkov (from the package index, in an environment of its own: tests/tool_venvs.py), whose
still-failing checks the page lists with their reasons."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.tool_venvs import tool

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


# ------------------------------------------------------------------------------ Kubernetes


def strategic_merge(base, patch):
    """`kubectl patch`'s default (strategic merge) for what the page's patch holds: mappings merged,
    lists of named items (containers, env) merged by name, anything else replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        return {
            **base,
            **{key: strategic_merge(base[key], value) if key in base else value for key, value in patch.items()},
        }
    named = (
        isinstance(base, list)
        and isinstance(patch, list)
        and all(isinstance(x, dict) and "name" in x for x in base + patch)
    )
    if not named:
        return patch
    merged = list(base)
    for item in patch:
        at = next((n for n, old in enumerate(merged) if old["name"] == item["name"]), None)
        merged[len(merged) :] = [item] if at is None else []
        if at is not None:
            merged[at] = strategic_merge(merged[at], item)
    return merged


def kubernetes_section() -> str:
    text = OPERATIONS.read_text()
    return text[text.index("## Kubernetes: a CronJob per agent") : text.index("## Browsing the records with datasette")]


def checkov(folder: Path) -> dict:
    done = subprocess.run(
        [str(tool("checkov")), "-d", str(folder), "--framework", "kubernetes", "--quiet", "--compact", "-o", "json"],
        capture_output=True,
        text=True,
        env={**os.environ, "BC_SKIP_MAPPING": "TRUE", "CHECKOV_RUN_SCA_PACKAGE_SCAN_V2": "false"},
    )
    found = json.loads(done.stdout)
    return found[0] if isinstance(found, list) else found


@pytest.fixture
def variants(tmp_path: Path) -> dict[str, Path]:
    """The page's manifests (the hardened variant) and the CronJob with the page's sandbox patch."""
    section = kubernetes_section()
    manifests = fenced_after(section, "```yaml", "yaml")
    patch = yaml.safe_load(fenced_after(section, "**With the sandbox**", "yaml"))
    hardened, sandbox = tmp_path / "hardened", tmp_path / "sandbox"
    hardened.mkdir()
    sandbox.mkdir()
    (hardened / "agent.yaml").write_text(manifests)
    (cronjob,) = [doc for doc in yaml.safe_load_all(manifests) if doc["kind"] == "CronJob"]
    (sandbox / "agent.yaml").write_text(yaml.safe_dump(strategic_merge(cronjob, patch)))
    return {"hardened": hardened, "sandbox": sandbox}


def listed_checks(after: str) -> set[str]:
    """The check ids of the first table after `after` in the Kubernetes section."""
    section = kubernetes_section()
    table = section[section.index(after) :].split("\n\n| check |", 1)[1].split("\n\n", 1)[0]
    return set(re.findall(r"^\| `(CKV_K8S_\d+)`", table, re.MULTILINE))


@pytest.mark.parametrize(
    ("variant", "after", "inherited"),
    [("hardened", "This is the hardened variant", set()), ("sandbox", "bubblewrap makes its own", {"CKV_K8S_35"})],
)
def test_each_kubernetes_variant_fails_only_the_checks_the_page_lists_with_its_figures(
    variants, variant, after, inherited
):
    found = checkov(variants[variant])
    failed = {check["check_id"] for check in found["results"]["failed_checks"]}
    assert failed == listed_checks(after) | inherited
    summary = found["summary"]
    figures = f"{summary['passed']} passed, {summary['failed']} failed"
    section = kubernetes_section()
    assert figures in section[section.index(after) :][:1500], figures


def test_the_sandbox_variant_keeps_every_other_hardening_and_asks_for_the_sandbox(variants):
    (cronjob,) = yaml.safe_load_all((variants["sandbox"] / "agent.yaml").read_text())
    pod = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (agent,) = pod["containers"]
    assert pod["hostUsers"] is False and agent["securityContext"]["procMount"] == "Unmasked"
    assert agent["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert agent["securityContext"]["allowPrivilegeEscalation"] is False
    assert agent["securityContext"]["readOnlyRootFilesystem"] is True
    assert {"name": "AGENT_SHELL_POLICY", "value": "sandbox"} in agent["env"]
