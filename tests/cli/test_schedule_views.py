"""A home with a `schedule` whose cron stopped: every view counts the same missed slots, exactly,
across the autumn change of daylight-saving time, and fleet alone (from its own cron line) says so once."""

from __future__ import annotations

import datetime as _dt
import json
import time
import zoneinfo
from pathlib import Path

import pytest
import yaml

from agent.store.home import Home
from tests.helpers import run_cli
from tests.histories import fabricated, write_history

BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")
GRACE_S = 600
# Its cron ran hourly until midnight, Berlin time, on the night the clocks went back, then stopped.
LAST_SLOT = _dt.datetime(2026, 10, 25, 0, tzinfo=BERLIN)


@pytest.fixture
def stopped(tmp_path) -> Path:
    root = tmp_path / "stopped"
    (root / "scratchpad").mkdir(parents=True)
    config = {"schedule": "0 * * * *", "schedule_timezone": "Europe/Berlin", "schedule_grace": GRACE_S}
    (root / "config.yaml").write_text(yaml.safe_dump(config))
    (root / "scratchpad" / "active.yaml").write_text(yaml.safe_dump({"current_task": None}))
    newest = LAST_SLOT + _dt.timedelta(seconds=5)
    write_history(Home.at(root), fabricated(30, newest, _dt.timedelta(hours=1), pattern=["done"]))
    return root


def _missed_now() -> int:
    """Hourly slots whose grace has passed since the last one met: every real hour, DST or not."""
    return int((time.time() - GRACE_S - LAST_SLOT.timestamp()) // 3600)


def _counted(view) -> tuple[int, object]:
    """(what `view()` counts, the missed slots then): counted again after, should an hour turn meanwhile."""
    before = _missed_now()
    counted = view()
    assert counted[0] in (before, _missed_now()), counted
    return counted


def test_status_counts_the_missed_slots_from_the_first_after_the_change(stopped):
    def view():
        data = json.loads(run_cli("status", "--json", "--home", str(stopped)).output)
        return data["schedule"]["missed"], data

    missed, data = _counted(view)
    assert data["state"] == "down" and data["needs_person"]
    assert data["schedule"]["first_missed"] == LAST_SLOT.timestamp() + 3600  # 01:00 CEST
    text = run_cli("status", "--home", str(stopped)).output
    assert f"missed {missed} slot(s) since Sun 25 Oct 01:00 CEST" in text or f"missed {missed + 1} slot" in text


def test_fleet_and_the_report_count_the_same_slots_and_fleet_exits_1(stopped, tmp_path):
    def fleet():
        result = run_cli("fleet", "--json", str(stopped))
        assert result.exit_code == 1
        [row] = json.loads(result.output)
        return row["schedule"]["missed"], row

    missed, row = _counted(fleet)
    assert row["state"] == "down" and row["attention"][0]["key"] == f"missed:{int(LAST_SLOT.timestamp()) + 3600}"

    def report():
        result = run_cli("report", "--json", "-o", str(tmp_path / "r.html"), str(stopped), str(stopped))
        return json.loads(result.output)["homes"][0]["schedule"]["missed"], None

    on_json = _counted(report)[0]
    assert on_json in (missed, missed + 1)
    assert f'data-field="schedule" data-missed="{on_json}"' in (tmp_path / "r.html").read_text()  # the page says it
    table = run_cli("fleet", str(stopped)).output.splitlines()[1]
    assert f" missed {missed} " in table or f" missed {missed + 1} " in table


def test_fleet_with_its_state_file_tells_a_stopped_scheduler_once(stopped, tmp_path):
    state = tmp_path / "fleet.state"
    first = run_cli("fleet", "-q", "--state", str(state), str(stopped))
    again = run_cli("fleet", "-q", "--state", str(state), str(stopped))
    assert first.exit_code == again.exit_code == 1
    assert "slot(s) since Sun 25 Oct 01:00 CEST" in first.output and again.output == ""
