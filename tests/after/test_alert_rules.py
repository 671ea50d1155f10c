"""The alert rules in docs/operations.md, run by Prometheus's own `promtool test rules` over the
metrics file a real cycle wrote in a home with a `schedule`, whose cron then stopped."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.cli.helpers import done, run_cycle
from tests.helpers import configure

REPO = Path(__file__).resolve().parents[2]
GRACE_S = 600


def _docs_rules() -> str:
    """The ```yaml block after "Alert rules for Prometheus" in docs/operations.md."""
    text = (REPO / "docs" / "operations.md").read_text()
    return re.search(r"Alert rules for Prometheus.*?```yaml\n(.*?)```", text, re.S).group(1)


def _metrics(path: Path) -> dict[str, tuple[str, float]]:
    """{metric name: (its labels, its value)} of the file's unlabelled-but-home series."""
    found = {}
    for line in path.read_text().splitlines():
        match = re.fullmatch(r"(agent_\w+)\{(home=\"[^\"]*\")\} (\S+)", line)
        if match:
            found[match.group(1)] = (match.group(2), float(match.group(3)))
    return found


@pytest.fixture
def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("CI must run this test, but promtool (Debian's prometheus package) is missing", pytrace=False)
        pytest.skip("promtool (Debian's prometheus package) is missing")
    return found


def test_the_schedule_alert_fires_on_a_home_whose_cron_stopped_and_not_before(home, tmp_path, promtool):
    configure(home, {"current_task": "one"}, metrics_file="agent.prom", schedule="*/5 * * * *", schedule_grace=GRACE_S)
    assert run_cycle(home, [done("did it")]).exit_code == 0
    metrics = _metrics(home / "agent.prom")
    labels, ended = metrics["agent_last_cycle_timestamp_seconds"]
    due = metrics["agent_schedule_next_due_timestamp_seconds"][1] - ended  # promtool's clock starts at the cycle's end
    assert 0 < due <= 300 and metrics["agent_schedule_grace_seconds"][1] == GRACE_S
    assert metrics["agent_needs_person"][1] == 0  # nothing needed a person when the cycle ended
    # the collector goes on serving the same file every minute after cron stopped rewriting it
    series = [
        {"series": f"agent_schedule_next_due_timestamp_seconds{{{labels}}}", "values": f"{due}x180"},
        {"series": f"agent_schedule_grace_seconds{{{labels}}}", "values": f"{GRACE_S}x180"},
        {"series": f"agent_needs_person{{{labels}}}", "values": "0x180"},
    ]
    home_label = {"home": labels.split('"')[1]}
    expected = [
        {"eval_time": "5m", "alertname": "AgentScheduleMissed", "exp_alerts": []},
        {"eval_time": "20m", "alertname": "AgentScheduleMissed", "exp_alerts": [{"exp_labels": home_label}]},
        {"eval_time": "2h", "alertname": "AgentScheduleMissed", "exp_alerts": [{"exp_labels": home_label}]},
        {"eval_time": "2h", "alertname": "AgentNeedsPerson", "exp_alerts": []},
    ]
    (tmp_path / "rules.yaml").write_text(_docs_rules())
    test = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series, "alert_rule_test": expected}],
    }
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(test, sort_keys=False))
    result = subprocess.run([promtool, "test", "rules", "test.yaml"], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
