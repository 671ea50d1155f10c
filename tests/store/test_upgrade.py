"""A home the release before logs/agent.db wrote (tests/store/older_home, made by its make.py with
that release's own code) upgrades on its first command and loses nothing: every cycle record, the
newest id and the cycles without a record, the journal with its cut call, the archive and what
recall finds in it, parked and approved calls, the inbox, the probes and every transcript. A kill -9
at any step of the upgrade leaves a home that the next command finishes upgrading; a database from
a newer agent is refused with one line and exit 2."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from agent.common.json_lines import json_lines, record_in
from agent.gates.approvals import read_approvals
from agent.memory.inbox import queued_edits
from agent.store import migrations
from agent.store.archive import archived, search
from agent.store.cycles import all_time, disk, newest_cycles
from agent.store.db import close_all, probe, records
from agent.store.home import Home
from agent.store.lock import is_locked
from tests.helpers import run_agent_process, run_cli, transcript, tree_digest, write_script

OLDER = Path(__file__).parent / "older_home"
CONFIG = (  # as make.py wrote it (config.yaml itself is not kept in git)
    "notes_budget: 300\ncompleted_window: 1\napproval_required: [shell]\nworkspace: workspace\n"
    "prices: {'scripted:x': {input: 1.0, output: 2.0}}\n"
)
KILLED = "20261127_200940_02"  # a cycle killed after its before snapshot: no record


@pytest.fixture
def older(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    shutil.copytree(OLDER, home, ignore=shutil.ignore_patterns("make.py", "__pycache__"))
    (home / "config.yaml").write_text(CONFIG)
    return home


def lines_of(path: Path) -> list[dict]:
    """The whole JSON records of an older release's file, read plainly (its torn last line left out)."""
    found = []
    for line in path.read_text().splitlines():
        try:
            found.append(json.loads(line))
        except ValueError:
            assert line == path.read_text().splitlines()[-1], "only the last line may be torn"
    return found


def what_the_files_held(home: Path) -> dict:
    """Everything the older release's files held, read before the upgrade."""
    logs = home / "logs"
    return {
        "records": lines_of(logs / "index.jsonl"),
        "calls": lines_of(logs / "calls.jsonl"),
        "archive": lines_of(logs / "archive.jsonl"),
        "parked": json.loads((home / "scratchpad" / "approvals.json").read_text()),
        "inbox": lines_of(home / "scratchpad" / "inbox.jsonl"),
        "endpoint": json.loads((logs / "endpoint.json").read_text()),
        "sandbox": json.loads((logs / "sandbox.json").read_text()),
        "transcripts": {
            p.name[len("cycle_") : -len(".transcript.jsonl")]: lines_of(p) for p in logs.glob("*.transcript.jsonl")
        },
    }


def what_the_database_holds(home: Path) -> dict:
    """The same, read through this release (which finishes the upgrade first, if it must)."""
    h = Home.at(home)
    db = records(h)
    found = {
        "records": [record for _, record in reversed(list(newest_cycles(h))) if record is not None],
        "calls": [json.loads(text) for (text,) in db.rows("SELECT record FROM call ORDER BY seq")],
        "archive": list(archived(h)),
        "parked": read_approvals(h),
        "inbox": queued_edits(h),
        "endpoint": probe(h, "endpoint"),
        "sandbox": probe(h, "sandbox"),
        "transcripts": {cycle_id: transcript(home, cycle_id) for cycle_id in _transcribed(db)},
    }
    close_all()
    return found


def _transcribed(db) -> list[str]:
    return [c for (c,) in db.rows("SELECT DISTINCT cycle_id FROM transcript")]


def test_the_older_homes_files_are_what_that_release_writes():
    """The fixture holds every kind of file the upgrade moves in (and a torn line to skip)."""
    names = {p.relative_to(OLDER).as_posix() for p in OLDER.rglob("*") if p.is_file()}
    kinds = {p.relative_to(OLDER).as_posix() for p in Home(OLDER).older_release_files}
    assert kinds - names == {"logs/recall.sqlite3-journal"}  # every other kind of file
    assert len([n for n in names if n.endswith(".transcript.jsonl")]) == 5
    assert not (OLDER / "logs" / "archive.jsonl").read_text().endswith("\n")  # torn


def test_the_first_command_a_read_only_one_upgrades_the_home_and_loses_nothing(older):
    held = what_the_files_held(older)
    status = run_cli("status", "--home", str(older), "--json")  # a read-only command, first
    assert status.exit_code == 0, status.output
    data = json.loads(status.stdout)
    assert data["cycles"] == len(held["records"]) + 1 and data["last_cycle"]["stop_reason"] == "killed"
    assert data["approvals"]["ids"] == ["2"]
    # the older release's files are gone; what stays a file stays
    left = sorted(p.relative_to(older).as_posix() for p in older.rglob("*") if p.is_file())
    gone = {p.relative_to(older).as_posix() for p in Home(older).older_release_files}
    assert not [name for name in left if name in gone or name.endswith(".transcript.jsonl")]
    assert "logs/agent.db" in left and len([n for n in left if n.startswith("logs/cycle_")]) == 5
    assert len([n for n in left if n.endswith(("_before.yaml", "_after.yaml"))]) == 11
    assert what_the_database_holds(older) == held


def test_what_the_upgraded_home_adds_up_and_finds_is_what_its_files_held(older):
    held = what_the_files_held(older)
    h = Home.at(older)
    assert all_time(h)["cycles"] == len(held["records"])
    assert disk(h) == {
        "snapshots": [11, sum(p.stat().st_size for p in (older / "scratchpad").glob("2*.yaml"))],
        "logs": [5, sum(p.stat().st_size for p in (older / "logs").glob("cycle_*.log"))],
    }
    about_the_disk = [r for r in held["archive"] if "disk" in json.dumps(r["value"]).lower()]
    found = search(h, "disk", 10)
    assert about_the_disk and len(found) == min(10, len(about_the_disk))
    assert all("disk" in match.text.lower() for match in found)
    history = json.loads(run_cli("history", "--home", str(older), "-n", "0", "--json").stdout)
    assert [r["cycle_id"] for r in history] == [KILLED] + [r["cycle_id"] for r in held["records"]][::-1]
    assert history[0]["stop_reason"] == "killed" and history[0]["source"] == "snapshots"


def test_the_first_cycle_after_the_upgrade_goes_on_where_the_older_release_stopped(older, tmp_path):
    """It applies the queued edit, notes the call a kill cut, runs the approved call, tells of the
    killed cycle, and takes an id after every one the older release gave."""
    script = write_script(tmp_path, [{"tool": "done", "args": {"summary": "tidied"}}])
    result = run_cli("run", "--home", str(older), "--model", f"scripted:{script}", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["cycle_id"] > KILLED
    before = yaml.safe_load((older / "scratchpad" / f"{report['cycle_id']}_before.yaml").read_text())
    assert "queued while a cycle ran" in [before["current_task"], *before["pending_actions"]]
    after = yaml.safe_load((older / "scratchpad" / f"{report['cycle_id']}_after.yaml").read_text())
    notes = after["notes"] + json.dumps([r["value"] for r in archived(Home.at(older))])  # the budget moves old ones
    assert "[INTERRUPTED] call 20200101_000000_01/1 write_file(" in notes
    assert f"cycle {KILLED} was killed before it saved anything" in notes
    assert "[APPROVAL] call 1 approved by the operator" in notes
    assert [r["status"] for r in read_approvals(Home.at(older))] == ["ran", "pending"]


def test_the_reader_of_the_older_files_skips_a_torn_line_and_finds_a_record_glued_after_one(tmp_path):
    path = tmp_path / "index.jsonl"
    glued = {"cycle_id": "b", "usage": {"prompt": 1}, "text": 'a {"quoted"} brace'}
    path.write_text(
        json.dumps({"cycle_id": "a"}) + "\n" + '{"cycle_id": "torn", "usage": {"pro' + json.dumps(glued) + "\n"
        "not json\n"
        + json.dumps({"other": 1})
        + "\n"
        + '{"n": ['
        + '{"n": 1},' * 50_000
        + "\n"
        + json.dumps({"cycle_id": "c", "text": "one\u2028two\x85three"})
        + "\n"
        + '{"cycle_id": "torn'
    )
    assert [r["cycle_id"] for r in json_lines(path, "cycle_id")] == ["a", "b", "c"]
    assert record_in('{"n": ' * 100_000 + "1" + "}" * 100_000, "n") is None  # nested too deep: skipped, quickly


@pytest.mark.parametrize(
    "broken, problem",
    [
        ("scratchpad/approvals.json", "not a list of approval records"),
        ("logs/cycles.json", None),  # a cache: the cycles on disk are listed instead
        ("logs/endpoint.json", None),  # a probe: probed again
    ],
)
def test_an_unreadable_older_file_refuses_the_upgrade_naming_it_or_is_rebuilt(older, broken, problem):
    (older / broken).write_text("{not json")
    frozen = tree_digest(older)
    result = run_cli("status", "--home", str(older))
    if problem is None:
        assert result.exit_code == 0 and not (older / broken).exists()
        assert KILLED in run_cli("history", "--home", str(older)).stdout
        return
    assert result.exit_code == 6 and f"{broken}: cannot be read" in result.stderr
    assert len(result.stderr.splitlines()) == 1 and tree_digest(older) == frozen  # nothing changed


def test_what_an_older_release_writes_on_an_upgraded_home_moves_in_at_the_next_command(older):
    """A downgrade and back: the older release, which does not see the database, writes its files
    afresh; the next command of this release moves those in too (a parked call gets a new id)."""
    assert run_cli("status", "--home", str(older)).exit_code == 0  # upgraded
    later = {"cycle_id": "20261128_000000_01", "started": "2026-11-28T00:00:00+00:00", "stop_reason": "done"}
    (older / "logs" / "index.jsonl").write_text(json.dumps(later) + "\n")
    parked = {"id": "1", "cycle_id": later["cycle_id"], "tool": "shell", "args": {"command": "uptime"}}
    (older / "scratchpad" / "approvals.json").write_text(json.dumps([dict(parked, status="pending")]))
    history = json.loads(run_cli("history", "--home", str(older), "-n", "0", "--json").stdout)
    assert history[0]["cycle_id"] == later["cycle_id"] and len(history) == 7
    calls = {r["id"]: (r["args"], r["status"]) for r in read_approvals(Home.at(older))}
    assert calls == {"1": ({"command": "ls"}, "approved"), "2": ({"command": "df -h"}, "pending")} | {
        "3": ({"command": "uptime"}, "pending")
    }
    assert not (older / "logs" / "index.jsonl").exists() and not (older / "scratchpad" / "approvals.json").exists()


HOLDER = """
import json, sys
from agent.store.home import Home
from agent.store.lock import is_locked
from agent.store.lock import home_lock
home = Home.at(sys.argv[1])
with home_lock(home):  # as an older release's cycle holds it, then appends its record
    print("held", flush=True)
    sys.stdin.readline()
    with open(home.logs / "index.jsonl", "a") as index:
        index.write(json.dumps({"cycle_id": "20261128_000000_01", "stop_reason": "done"}) + "\\n")
"""


def test_a_read_only_command_upgrades_under_the_homes_lock_after_the_cycle_holding_it(older):
    """`agent status` on a home not yet upgraded, while an older release's cycle holds the lock:
    it waits for the lock, then moves in everything, the record that cycle appended last too."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(older)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout.readline() == "held\n"
    status = subprocess.Popen(
        [sys.executable, "-m", "agent", "status", "--home", str(older), "--json"], stdout=subprocess.PIPE, text=True
    )
    holder.communicate("go\n", timeout=60)
    out, _ = status.communicate(timeout=120)
    assert status.returncode == 0 and json.loads(out)["last_cycle"]["cycle_id"] == "20261128_000000_01"
    assert not (older / "logs" / "index.jsonl").exists()


# -------------------------------------------------------------------------------- kill -9


@pytest.mark.slow  # many real processes
def test_a_kill_at_any_step_of_the_upgrade_leaves_a_home_the_next_command_finishes(tmp_path: Path):
    """AGENT_TEST_KILL_AT=k SIGKILLs the first `agent run` of the older home at its k-th write step,
    through every step of the upgrade (each migration's transaction, each transcript moved in, the
    older files removed). After each kill, the next command finishes the upgrade and holds exactly
    what the older release's files held, and a cycle then runs."""
    script = write_script(tmp_path, [{"tool": "done", "args": {"summary": "tidied"}}])
    held, steps, k = None, [], 0
    while not steps or steps[-1] != "agent.db: older files removed":  # to the end of the upgrade
        k += 1
        assert k < 80, "more kill points than expected: is the AGENT_TEST_KILL_AT counter broken?"
        home = tmp_path / f"kill-{k}"
        shutil.copytree(OLDER, home, ignore=shutil.ignore_patterns("make.py", "__pycache__"))
        (home / "config.yaml").write_text(CONFIG)
        held = held or what_the_files_held(home)
        killed = run_agent_process(
            "run", "--home", str(home), "--model", f"scripted:{script}", env={"AGENT_TEST_KILL_AT": str(k)}
        )
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        step = re.search(r"AGENT_TEST_KILL_AT: killed at (.*)", killed.stderr).group(1)
        steps.append(step)
        assert what_the_database_holds(home) == held, step  # finished by this (reading) command
        after = run_agent_process("run", "--home", str(home), "--model", f"scripted:{script}")
        assert after.returncode == 0, (step, after.stderr)
        shutil.rmtree(home)
    joined = "\n".join(steps)
    for must in (
        f"agent.db: migrations to {len(migrations.MIGRATIONS)} applied",
        "agent.db: index imported",
        "agent.db: archive imported",
        "agent.db: older records imported",
        "agent.db: transcripts imported",
        "agent.db: older files removed",
    ):
        assert must in joined, f"no kill at '{must}' (saw: {steps})"
    assert joined.count("agent.db: transcripts imported") == 1  # five files, one batch


# ------------------------------------------------------------------------ a newer database


@pytest.mark.parametrize("command", [["status"], ["history"], ["run"], ["task", "add", "x"], ["approvals"]])
def test_a_database_from_a_newer_agent_is_refused_with_one_line_and_exit_2(older, command, tmp_path):
    assert run_cli("status", "--home", str(older)).exit_code == 0  # upgraded
    newer = len(migrations.MIGRATIONS) + 1
    connection = sqlite3.connect(older / "logs" / "agent.db")
    connection.execute(f"PRAGMA user_version = {newer}")
    connection.close()
    frozen = tree_digest(older)
    extra = ["--model", f"scripted:{write_script(tmp_path, [{'tool': 'done', 'args': {'summary': 'x'}}])}"]
    result = run_cli(*command, "--home", str(older), *(extra if command == ["run"] else []))
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.stderr.splitlines() == [
        f"agent: error: {older / 'logs' / 'agent.db'} was written by a newer agent (its records are at "
        f"migration {newer}, this agent knows {newer - 1}): upgrade agent to use this home"
    ]
    assert tree_digest(older) == frozen


# ------------------------------------------------------------ an older home's files, untrusted

OUTSIDE_NOTE = "a note from outside the home"
TRANSCRIPT = "logs/cycle_20261127_200939_01.transcript.jsonl"


def _fifo(home: Path, name: str, outside: Path) -> None:
    (home / name).unlink()
    os.mkfifo(home / name)


def _link_out(home: Path, name: str, outside: Path) -> None:
    """`name` made a link to a file outside the home, holding records the upgrade would take."""
    record = {"cycle_id": "20261127_200939_01", "kind": "note", "value": OUTSIDE_NOTE, "call": "x", "role": "user"}
    outside.write_text(json.dumps(record) + "\n")
    (home / name).unlink()
    (home / name).symlink_to(outside)


REFUSED = [
    ("logs/index.jsonl", _fifo, "is not a regular file but a named pipe (FIFO)"),
    ("scratchpad/inbox.jsonl", _fifo, "is not a regular file but a named pipe (FIFO)"),
    (TRANSCRIPT, _fifo, "is not a regular file but a named pipe (FIFO)"),
    ("logs/archive.jsonl", _link_out, "is a symbolic link (to "),
    (TRANSCRIPT, _link_out, "is a symbolic link (to "),
]


def _agent_within_seconds(command: str, home: Path, script: Path) -> subprocess.CompletedProcess:
    """`agent status` or `agent run` of `home` as a real process, which must end within 30 s."""
    extra = ["--model", f"scripted:{script}"] if command == "run" else ["--json"]
    return run_agent_process(command, "--home", str(home), *extra, timeout=30)


def _nothing_from_outside(home: Path) -> bool:
    return not any(
        OUTSIDE_NOTE.encode() in p.read_bytes() for p in home.rglob("*") if p.is_file() and not p.is_symlink()
    )


@pytest.mark.parametrize("command", ["status", "run"])
@pytest.mark.parametrize("name, make, problem", REFUSED, ids=[f"{m.__name__[1:]} {n}" for n, m, _ in REFUSED])
def test_a_fifo_or_a_link_among_the_older_files_refuses_the_upgrade_in_one_line_and_frees_the_lock(
    older, tmp_path, command, name, make, problem
):
    make(older, name, tmp_path / "outside.jsonl")
    active = (older / "scratchpad" / "active.yaml").read_bytes()
    script = write_script(tmp_path, [{"tool": "done", "args": {"summary": "x"}}])
    result = _agent_within_seconds(command, older, script)
    assert result.returncode == 6 and "Traceback" not in result.stderr, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith(f"agent: error: {older / name}: {problem}") and "move it out of the home" in line
    assert _nothing_from_outside(older) and (older / "scratchpad" / "active.yaml").read_bytes() == active
    assert (older / name).is_symlink() or (older / name).is_fifo()  # left for the operator, as it was
    assert not is_locked(Home.at(older))


def test_once_the_refused_file_is_moved_away_the_next_command_finishes_the_upgrade(older, tmp_path):
    _fifo(older, "logs/index.jsonl", tmp_path)
    assert _agent_within_seconds("status", older, tmp_path).returncode == 6
    (older / "logs" / "index.jsonl").rename(tmp_path / "index.fifo")
    status = _agent_within_seconds("status", older, tmp_path)
    assert status.returncode == 0 and json.loads(status.stdout)["approvals"]["ids"] == ["2"]
    assert not (older / "logs" / "archive.jsonl").exists()  # the rest moved in


ESCAPED = "\x1b]0;owned\x07\x1b[2J20261130_000000_01"
BAD_IDS = [("99991231_235959_99", "year 9999"), (ESCAPED, "an escape"), ("20261399_000000_01", "no such day")]


@pytest.mark.parametrize("command", ["status", "run"])
@pytest.mark.parametrize("bad_id", [b for b, _ in BAD_IDS], ids=[why for _, why in BAD_IDS])
def test_a_record_whose_cycle_id_is_not_of_ours_is_skipped_with_a_warning(older, tmp_path, command, bad_id):
    with open(older / "logs" / "index.jsonl", "a") as index:
        index.write("\n" + json.dumps({"cycle_id": bad_id, "stop_reason": "done", "exit_code": 0}) + "\n")
    script = write_script(tmp_path, [{"tool": "done", "args": {"summary": "x"}}])
    result = _agent_within_seconds(command, older, script)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        f"agent: warning: the upgrade skipped {older / 'logs' / 'index.jsonl'}: 1 cycle id not of this agent's form"
    ]
    history = json.loads(run_cli("history", "--home", str(older), "-n", "0", "--json").stdout)
    assert bad_id not in [r["cycle_id"] for r in history] and "\x1b" not in result.stdout
    newest = history[0]["cycle_id"]
    assert newest == KILLED if command == "status" else newest > KILLED and newest < "9999"
    assert not is_locked(Home.at(older))


PEAK = """
import atexit, re, runpy, sys
peak = sys.argv.pop(1)
atexit.register(lambda: open(peak, "w").write(re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read())[1]))
runpy.run_module("agent", run_name="__main__")
"""


@pytest.mark.slow  # writes 200 MB
@pytest.mark.parametrize("command", ["status", "run"])
def test_a_200_mb_line_is_skipped_unread_and_the_upgrade_stays_small(older, tmp_path, command):
    held = len(lines_of(older / "logs" / "index.jsonl"))
    records = (older / "logs" / "index.jsonl").read_bytes()
    with open(older / "logs" / "index.jsonl", "wb") as index:  # in pieces: this process stays small (fork copies it)
        index.write(b'{"cycle_id": "20261127_000000_01", "torn": "')
        for _ in range(200):
            index.write(b"x" * 1_000_000)
        index.write(b"\n" + records)
    script = write_script(tmp_path, [{"tool": "done", "args": {"summary": "x"}}])
    extra = ["--model", f"scripted:{script}"] if command == "run" else []
    peak = tmp_path / "peak"
    proc = subprocess.run(  # the agent's own peak (VmHWM: rusage would count this process's, copied at the fork)
        [sys.executable, "-c", PEAK, str(peak), command, "--home", str(older), *extra],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert int(peak.read_text()) < 120 * 1024, f"peak {peak.read_text()} KiB"  # a line held whole: 200 MB
    skipped = f"agent: warning: the upgrade skipped {older / 'logs' / 'index.jsonl'}: 1 line over 8 MiB"
    assert proc.stderr.splitlines() == [skipped]
    assert all_time(Home.at(older))["cycles"] == held + (command == "run")  # every record after it moved in
    assert not is_locked(Home.at(older))
