"""`agent fleet`: one row per home, exit 1 when any needs a person; --quiet, --json, --state."""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path

import pytest
import yaml

from agent.store.home import Home
from tests.helpers import run_cli, write_script
from tests.histories import fabricated, write_history

EVERY = _dt.timedelta(minutes=15)


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0)


def _home(folder: Path, name: str, config: dict | None = None, state: dict | None = None) -> Path:
    root = folder / name
    (root / "scratchpad").mkdir(parents=True)
    (root / "config.yaml").write_text(yaml.safe_dump(config or {}))
    (root / "scratchpad" / "active.yaml").write_text(yaml.safe_dump(state or {"current_task": None}))
    return root


def healthy_home(folder: Path) -> Path:
    """Thirty done cycles 15 minutes apart, the newest started six minutes ago (it took a few seconds)."""
    root = _home(folder, "healthy")
    write_history(Home.at(root), fabricated(30, _now() - _dt.timedelta(minutes=6), EVERY, pattern=["done"]))
    return root


def stale_home(folder: Path) -> Path:
    """Thirty done cycles 15 minutes apart, the newest three and a half hours ago: stale after 45 minutes."""
    root = _home(folder, "stale")
    write_history(Home.at(root), fabricated(30, _now() - _dt.timedelta(hours=3.5), EVERY, pattern=["done"]))
    return root


def stalled_home(folder: Path) -> Path:
    """Two real cycles on one task that never ends: the second stops `stalled` (exit 9)."""
    root = _home(folder, "stalled", {"stall_cycles": 2, "max_iterations": 1}, {"current_task": "count the stars"})
    script = write_script(folder, [{"tool": "echo", "args": {"message": "still counting"}}], "stall.yaml")
    for code in (3, 9):
        assert run_cli("run", "--home", str(root), "--model", f"scripted:{script}").exit_code == code
    return root


def parked_home(folder: Path) -> Path:
    """A real cycle whose write_file call waits for the operator (exit 8)."""
    root = _home(folder, "parked", {"approval_required": ["write_file"]}, {"current_task": "write the report"})
    script = write_script(folder, [{"tool": "write_file", "args": {"path": "r.txt", "content": "x"}}], "park.yaml")
    assert run_cli("run", "--home", str(root), "--model", f"scripted:{script}").exit_code == 8
    return root


@pytest.fixture
def fleet(tmp_path: Path) -> dict[str, Path]:
    homes = {
        "healthy": healthy_home(tmp_path),
        "stale": stale_home(tmp_path),
        "stalled": stalled_home(tmp_path),
        "parked": parked_home(tmp_path),
        "not a home": tmp_path / "photos",
    }
    homes["not a home"].mkdir()
    return homes


def _fleet(*args: str):
    return run_cli("fleet", *map(str, args))


def test_a_healthy_home_alone_needs_nobody_and_exits_0(fleet):
    result = _fleet(fleet["healthy"])
    assert result.exit_code == 0, result.output
    header, row = result.output.splitlines()
    assert header.split() == ["HOME", "LAST", "OUTCOME", "STATE", "TODAY", "ATTENTION"]
    assert row.split()[:5] == [str(fleet["healthy"]), "5m", "ago", "done", "ok"]
    assert row.endswith("-")


def test_the_table_puts_the_homes_that_need_a_person_first_and_exits_1(fleet):
    result = _fleet(*fleet.values())
    assert result.exit_code == 1, result.output
    rows = result.output.splitlines()[1:]
    assert [row.split()[0] for row in rows][-1] == str(fleet["healthy"])
    by_home = {row.split()[0]: row for row in rows}
    assert "not a home" in by_home[str(fleet["not a home"])]
    assert " stalled " in by_home[str(fleet["stalled"])]
    assert " parked " in by_home[str(fleet["parked"])] and "awaiting_approval" in by_home[str(fleet["parked"])]
    assert "no cycle for 3h (stale after 45m)" in by_home[str(fleet["stale"])]


def test_quiet_prints_one_line_per_home_that_needs_a_person(fleet):
    result = _fleet("--quiet", *fleet.values())
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert len(lines) == 4
    assert all(line.startswith("agent: ") and " needs a person: " in line for line in lines)
    named = {line.split()[1] for line in lines}
    assert named == {str(fleet[k]) for k in ("stale", "stalled", "parked", "not a home")}
    assert not any(str(fleet["healthy"]) + " " in line for line in lines)


def test_quiet_prints_nothing_and_exits_0_when_nobody_is_needed(fleet):
    result = _fleet("-q", fleet["healthy"])
    assert (result.exit_code, result.output) == (0, "")


def test_json_gives_each_home_its_state_and_what_needs_a_person(fleet):
    result = _fleet("--json", *fleet.values())
    assert result.exit_code == 1
    rows = {Path(row["home"]).name: row for row in json.loads(result.output)}
    assert {name: row["state"] for name, row in rows.items()} == {
        "healthy": "ok",
        "stale": "stale",
        "stalled": "stalled",
        "parked": "parked",
        "photos": "not a home",
    }
    assert {name: row["needs_person"] for name, row in rows.items()} == {
        "healthy": False,
        "stale": True,
        "stalled": True,
        "parked": True,
        "photos": True,
    }
    assert rows["stale"]["stale"] is True and rows["stale"]["usual_interval_s"] == 900.0
    assert rows["stale"]["stale_after_s"] == 2700.0
    assert [item["key"].split(":")[0] for item in rows["stalled"]["attention"]] == ["incident"]
    assert rows["parked"]["approvals_pending"] == 1
    assert rows["photos"]["is_home"] is False and "no scratchpad/ folder" in rows["photos"]["problem"]
    assert rows["healthy"]["attention"] == [] and rows["healthy"]["last_outcome"] == "done"


def test_the_state_file_reports_each_thing_once_and_again_when_it_comes_back(fleet, tmp_path):
    state = tmp_path / "fleet-state.json"
    first = _fleet("-q", "--state", state, *fleet.values())
    assert first.exit_code == 1 and len(first.output.splitlines()) == 4
    again = _fleet("-q", "--state", state, *fleet.values())
    assert (again.exit_code, again.output) == (1, "")  # still needs a person: the exit code says so
    other = tmp_path / "other-photos"
    other.mkdir()
    news = _fleet("-q", "--state", state, *fleet.values(), other)
    assert news.output.splitlines() == [f"agent: {other} needs a person: " + news.output.split(": ", 2)[2].strip()]
    assert str(other) in news.output and "not a home" in news.output
    cleared = _fleet("-q", "--state", state, fleet["healthy"])  # the others left the list: forgotten
    assert (cleared.exit_code, cleared.output) == (0, "")
    back = _fleet("-q", "--state", state, fleet["parked"])
    assert back.exit_code == 1 and str(fleet["parked"]) in back.output


def test_a_state_file_fleet_did_not_write_is_refused_and_left_as_it_is(fleet, tmp_path):
    state = tmp_path / "state.json"
    state.write_text('{"something": "else"}')
    result = _fleet("-q", "--state", state, fleet["healthy"])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and "not a state file `agent fleet` wrote" in result.output
    assert state.read_text() == '{"something": "else"}'


@pytest.mark.parametrize("value", ["soon", "0m", "-5m"])
def test_a_bad_stale_after_is_a_usage_error(fleet, value):
    result = _fleet("--stale-after", value, fleet["healthy"])
    assert result.exit_code == 2 and "stale-after" in result.output


def test_stale_after_on_the_command_line_overrides_the_usual_interval(fleet):
    assert _fleet("-q", "--stale-after", "4h", fleet["stale"]).exit_code == 0
    assert _fleet("-q", "--stale-after", "2h", fleet["stale"]).exit_code == 1


def test_the_stale_after_setting_overrides_the_usual_interval(fleet):
    (fleet["stale"] / "config.yaml").write_text("stale_after: 4\n")
    result = _fleet("--json", fleet["stale"])
    assert result.exit_code == 0 and json.loads(result.output)[0]["stale_after_s"] == 4 * 3600


def test_a_call_parked_for_more_than_a_day_needs_a_person_even_after_a_good_cycle(fleet):
    from agent.store.db import records

    root = fleet["parked"]
    db = records(Home.at(root))
    with db.write():  # the call was parked two days ago
        parked = (_now() - _dt.timedelta(days=2)).isoformat()
        assert db.execute("UPDATE approval SET record = json_set(record, '$.parked', ?)", (parked,)).rowcount == 1
    write_history(Home.at(root), fabricated(1, _now(), EVERY, pattern=["done"]))
    rows = json.loads(_fleet("--json", root).output)
    assert [item["text"] for item in rows[0]["attention"]] == ["1 call(s) parked, the oldest for 2d"]


def test_a_spent_budget_needs_a_person(fleet):
    (fleet["healthy"] / "config.yaml").write_text("daily_token_budget: 1000\n")
    result = _fleet("-q", fleet["healthy"])
    assert result.exit_code == 1 and "daily_token_budget is spent" in result.output


def test_a_home_that_never_ran_needs_a_person(tmp_path):
    root = _home(tmp_path, "new")
    result = _fleet("-q", root)
    assert result.exit_code == 1 and "no cycle has run yet" in result.output


def test_a_broken_config_needs_a_person(fleet):
    (fleet["healthy"] / "config.yaml").write_text("max_iterations: lots\n")
    result = _fleet("-q", fleet["healthy"])
    assert result.exit_code == 1 and "needs a person: config: setting 'max_iterations' must be" in result.output


def test_a_home_whose_records_are_not_a_database_needs_a_person_and_keeps_the_file(fleet):
    database = fleet["stale"] / "logs" / "agent.db"
    for name in ("agent.db-wal", "agent.db-shm"):
        (database.parent / name).unlink(missing_ok=True)
    database.write_bytes(b"not a database at all\n" * 300)
    result = _fleet("--json", fleet["stale"], fleet["healthy"])
    rows = {row["home"]: row for row in json.loads(result.output)}
    broken = rows[str(fleet["stale"])]
    assert result.exit_code == 1 and broken["state"] == "unreadable" and broken["needs_person"]
    [item] = broken["attention"]
    assert item["text"].startswith("cannot use it: ") and "agent.db is not a usable database" in item["text"]
    assert rows[str(fleet["healthy"])]["state"] == "ok"  # one broken home does not blind the monitor
    assert database.read_bytes() == b"not a database at all\n" * 300  # left as it was, for a person to look at


def test_model_text_in_a_row_is_escaped(tmp_path):
    root = _home(tmp_path, "hostile")
    record = fabricated(1, _now(), EVERY, pattern=["error"])[0]
    record["error"] = "boom\x1b]52;c;bad\x07\nforged line"
    write_history(Home.at(root), [record])
    result = _fleet("-q", root)
    assert result.exit_code == 1
    assert "\x1b" not in result.output and "\x07" not in result.output
    assert result.output.count("\n") == 1 and "\\x1b" in result.output


def test_fleet_needs_at_least_one_home():
    result = _fleet()
    assert result.exit_code == 2 and "HOME" in result.output


def test_a_cycle_running_for_longer_than_stale_after_needs_a_person(fleet):
    from agent.store.cycles import new_cycle_id
    from agent.store.lock import home_lock

    home = Home.at(fleet["stale"])  # its last cycle ended three and a half hours ago
    hung = new_cycle_id(home, _now() - _dt.timedelta(hours=2))  # one started two hours ago, and never ended
    home.snapshot(hung, "before").write_text((fleet["stale"] / "scratchpad" / "active.yaml").read_text())
    with home_lock(home):
        row = json.loads(_fleet("--json", fleet["stale"]).output)[0]
    assert (row["state"], row["running"]) == ("running", True)
    assert [item["text"] for item in row["attention"]] == ["a cycle has run for 2h (stale after 45m)"]


def test_a_reverted_consolidation_is_an_incident(tmp_path):
    """Issue 33: a reverted consolidation counts as a failure, so fleet names it though it exits 3."""
    from tests.memory.homes import known, with_sections

    root = with_sections(
        tmp_path / "memory", {"current_task": None, "known": known("a", "b"), "section_ids": {"known": 2}}
    )
    script = write_script(tmp_path, [{"tool": "consolidate", "args": {"sections": {"known": []}}}])
    assert run_cli("consolidate", "--home", str(root), "--model", f"scripted:{script}").exit_code == 3
    result = run_cli("fleet", "-q", str(root))
    assert result.exit_code == 1 and "incident: failing: consolidation_reverted" in result.stdout, result.output
