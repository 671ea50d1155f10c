"""Every state of agent/after/health.py's documented set, read by every view: `status`, `fleet`,
`report` and `doctor` give each home the same state, one line per problem, no traceback, every home
its row, and fleet's exit code says whether any needs a person."""

from __future__ import annotations

import datetime as _dt
import json
import os
import sqlite3
from pathlib import Path

import pytest
import yaml

from agent.after.health import STATES
from agent.store.home import Home
from agent.store.lock import home_lock
from tests.conftest import embedded_model_missing
from tests.helpers import run_cli, write_script
from tests.histories import fabricated, write_history

EVERY = _dt.timedelta(minutes=15)
TELL = {"tell": {"kind": "list", "limit": 3, "surface": True, "description": "What a person should know."}}
BROKEN_FILES = {  # the home's name: (the file, how it is broken)
    "broken config": ("config.yaml", lambda root: (root / "config.yaml").write_text("max_iterations: lots\n")),
    "broken rules": ("rules.md", lambda root: os.mkfifo(root / "rules.md")),
    "broken scratchpad": (
        "scratchpad/active.yaml",
        lambda root: (root / "scratchpad" / "active.yaml").write_bytes(b"current_task: \xff\xfe\n"),
    ),
    "broken examples": ("examples.yaml", lambda root: (root / "examples.yaml").write_text("just: a mapping\n")),
    "broken records": ("logs/agent.db", lambda root: _drop_table(root, "outcome")),
    "broken workspace": ("workspace/", lambda root: (root / "workspace").write_text("a file, not a folder\n")),
}


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0)


def _home(folder: Path, name: str, config: dict | None = None, state: dict | None = None) -> Path:
    root = folder / name.replace(" ", "-")
    (root / "scratchpad").mkdir(parents=True)
    (root / "config.yaml").write_text(yaml.safe_dump(config or {}))
    (root / "scratchpad" / "active.yaml").write_text(yaml.safe_dump(state or {"current_task": None}))
    return root


def _history(root: Path, pattern: list[str], newest: _dt.timedelta = _dt.timedelta(minutes=6), count: int = 30):
    write_history(Home.at(root), fabricated(count, _now() - newest, EVERY, pattern=pattern))
    return root


def _drop_table(root: Path, table: str) -> None:
    _history(root, ["done"])
    with sqlite3.connect(root / "logs" / "agent.db") as db:
        db.execute(f"DROP TABLE {table}")


def _parked(folder: Path) -> Path:
    root = _home(folder, "parked", {"approval_required": ["write_file"]}, {"current_task": "write the report"})
    script = write_script(folder, [{"tool": "write_file", "args": {"path": "r.txt", "content": "x"}}], "park.yaml")
    assert run_cli("run", "--home", str(root), "--model", f"scripted:{script}").exit_code == 8
    return root


@pytest.fixture
def homes(tmp_path) -> dict[str, tuple[Path, str]]:
    """{name: (home, the state every view must give it)}: one or more of each state (unreadable: below)."""
    made = {
        "ok": (_history(_home(tmp_path, "ok"), ["done"]), "ok"),
        "idle": (_history(_home(tmp_path, "idle"), ["idle"]), "idle"),
        "stale": (_history(_home(tmp_path, "stale"), ["done"], _dt.timedelta(hours=3.5)), "down"),
        "never ran": (_home(tmp_path, "never ran"), "never ran"),
        "failing": (_history(_home(tmp_path, "failing"), ["error"]), "failing"),
        "stalled": (_history(_home(tmp_path, "stalled"), ["stalled"]), "stalled"),
        "held": (_history(_home(tmp_path, "held"), ["stalled", "held"]), "held"),
        "budget spent": (_history(_home(tmp_path, "budget"), ["budget_exhausted"]), "budget spent"),
        "parked": (_parked(tmp_path), "parked"),
        "told": (
            _history(_home(tmp_path, "told", {"sections": TELL}, {"tell": ["the disk is nearly full"]}), ["done"]),
            "surfaced",
        ),
        "late": (  # its slot of 10 to 20 minutes ago had no cycle yet, within the hour's grace
            _history(_home(tmp_path, "late", {"schedule": "*/10 * * * *"}), ["done"], _dt.timedelta(minutes=25), 1),
            "late",
        ),
        "running": (_history(_home(tmp_path, "running"), ["done"]), "running"),
        "not a home": ((tmp_path / "photos").resolve(), "not a home"),
    }
    (tmp_path / "photos").mkdir()
    for name, (file, breaks) in BROKEN_FILES.items():
        root = _history(_home(tmp_path, name), ["done"]) if file != "logs/agent.db" else _home(tmp_path, name)
        breaks(root)
        made[name] = (root, "broken")
    return made


def _views_while_running(homes: dict, *args: str):
    """`agent ARGS` with the `running` home's lock held, as a cycle holds it."""
    with home_lock(Home.at(homes["running"][0])):
        return run_cli(*args)


def test_the_set_of_homes_covers_every_documented_state_but_unreadable(homes):
    assert {state for _, state in homes.values()} == set(STATES) - {"unreadable"}


def test_fleet_gives_every_home_its_documented_state_and_exits_1(homes):
    result = _views_while_running(homes, "fleet", "--json", *(str(root) for root, _ in homes.values()))
    assert result.exit_code == 1 and "Traceback" not in result.output + result.stderr
    rows = {row["home"]: row for row in json.loads(result.output)}
    assert {name: rows[str(root)]["state"] for name, (root, _) in homes.items()} == {
        name: state for name, (_, state) in homes.items()
    }
    for name, (root, state) in homes.items():  # ok only when nothing needs a person
        assert rows[str(root)]["needs_person"] is (state not in ("ok", "idle", "late", "running")), name


def test_each_broken_file_is_one_line_naming_the_file_in_fleet_and_status(homes):
    for name, (file, _) in BROKEN_FILES.items():
        root = homes[name][0]
        fleet = run_cli("fleet", "-q", str(root))
        assert fleet.exit_code == 1 and fleet.output.count("\n") == 1, fleet.output
        assert f"needs a person: {file}: " in fleet.output and fleet.output.count(f"{file}:") == 1, fleet.output
        status = run_cli("status", "--home", str(root))
        assert status.exit_code == (7 if file == "logs/agent.db" else 0), status.output
        needs = [line for line in status.output.splitlines() if line.startswith("needs:")]
        assert needs == [line for line in needs if line.startswith(f"needs:     {file}: ")] and len(needs) == 1
        assert "state:     broken  (needs a person)" in status.output


def test_status_json_gives_each_home_the_state_fleet_gives(homes):
    for name, (root, state) in homes.items():
        if name == "not a home":
            continue
        result = _views_while_running(homes, "status", "--json", "--home", str(root))
        assert result.exit_code in (0, 7) and "Traceback" not in result.stderr, (name, result.stderr)
        data = json.loads(result.stdout)
        assert (data["state"], data["needs_person"]) == (state, state not in ("ok", "idle", "late", "running")), name


def test_the_report_gives_every_home_its_state(homes, tmp_path):
    page = tmp_path / "fleet.html"
    folders = [str(root) for root, _ in homes.values()]
    result = _views_while_running(homes, "report", "--json", "-o", str(page), *folders)
    assert result.exit_code == 0, result.output
    shown = {row["home"]: row["state"] for row in json.loads(result.output)["homes"]}
    assert {name: shown[str(root)] for name, (root, _) in homes.items()} == {n: s for n, (_, s) in homes.items()}
    html = page.read_text()
    assert all(f'data-state="{state}"' in html for _, state in homes.values())


def test_doctor_fails_each_broken_file(homes):
    checks = {"config.yaml": "config", "rules.md": "rules", "scratchpad/active.yaml": "scratchpad"}
    checks.update({"examples.yaml": "examples", "logs/agent.db": "records", "workspace/": "workspace"})
    for name, (file, _) in BROKEN_FILES.items():
        result = run_cli("doctor", "--json", "--home", str(homes[name][0]))
        assert result.exit_code == 1 and "Traceback" not in result.stderr, (name, result.output)
        failed = [check["check"] for check in json.loads(result.output) if not check["ok"]]
        # doctor judges the home as a plain `agent run` would run it: with no model in config.yaml,
        # that needs the embedded model (the [local] extra), so without it `model` fails as well
        no_model = ["model"] if embedded_model_missing() and file != "config.yaml" else []  # a broken config: one line
        assert sorted(failed) == sorted([checks[file], *no_model]), (name, failed)


def test_fleet_over_homes_that_need_nobody_exits_0(homes):
    quiet = [str(homes[name][0]) for name in ("ok", "idle", "late", "running")]
    result = _views_while_running(homes, "fleet", *quiet)
    assert result.exit_code == 0, result.output
    assert len(result.output.splitlines()) == 1 + len(quiet)


def test_a_home_whose_cycles_ran_on_a_model_given_by_flag_needs_no_model_in_config(agent_user):
    """As an ordinary user (its python has no embedded model), config.yaml naming no model: judged by
    what its cycles ran on, it is ok; one that never ran says so (how cron runs it is not known yet)."""
    by_flag = agent_user.make_home({}, "by-flag")
    done = agent_user.cycle(by_flag, [{"tool": "done", "args": {"summary": "ok"}}])
    assert done.returncode == 0, done.stderr
    unset = agent_user.make_home({}, "unset")
    result = agent_user.agent("fleet", "--json", str(by_flag), str(unset))
    rows = {Path(row["home"]).parent.name.split(".")[0]: row for row in json.loads(result.stdout)}
    assert rows["by-flag"]["state"] == "ok" and not rows["by-flag"]["needs_person"]
    assert rows["unset"]["state"] == "never ran"  # how its cron line will run it is not known before a cycle


def test_another_users_home_is_an_unreadable_row_beside_the_others(agent_user, tmp_path):
    if not agent_user.switches:
        pytest.skip("needs an ordinary user beside root")
    theirs = _history(_home(tmp_path, "theirs"), ["done"])  # root's, mode 0700 as `agent init` makes it
    theirs.chmod(0o700)
    tmp_path.chmod(0o755)
    mine = agent_user.make_home({}, "mine")
    result = agent_user.agent("fleet", "--json", str(mine), str(theirs))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    rows = {row["home"]: row for row in json.loads(result.stdout)}
    assert rows[str(theirs)]["state"] == "unreadable" and rows[str(theirs)]["needs_person"]
    assert rows[str(mine)]["state"] in ("never ran", "broken")
    table = agent_user.agent("fleet", str(mine), str(theirs))
    assert table.returncode == 1 and len(table.stdout.splitlines()) == 3, table.stdout


def test_a_run_on_a_database_missing_a_table_is_one_line_exit_7_and_keeps_the_state(tmp_path):
    root = _home(tmp_path, "dropped", state={"current_task": "keep me"})
    _drop_table(root, "outcome")
    before = (root / "scratchpad" / "active.yaml").read_bytes()
    script = write_script(tmp_path, [{"tool": "done", "args": {"summary": "done"}}])
    result = run_cli("run", "--home", str(root), "--model", f"scripted:{script}")
    assert result.exit_code == 7 and "Traceback" not in result.output
    [line] = result.stderr.splitlines()
    assert line.startswith(f"agent: error: {root / 'logs' / 'agent.db'} is not a usable database (no such table")
    assert (root / "scratchpad" / "active.yaml").read_bytes() == before


def test_a_folder_its_owner_cannot_write_is_broken(agent_user):
    if not agent_user.switches:
        pytest.skip("root writes any folder: the ordinary user's run checks this")
    root = agent_user.make_home({}, "locked")
    (root / "logs").chmod(0o500)
    result = agent_user.agent("fleet", "--json", str(root))
    [row] = json.loads(result.stdout)
    assert result.returncode == 1 and row["state"] == "broken"
    assert "logs/" in [p["file"] for p in row["problems"]]  # (and config.yaml: this user has no embedded model)
