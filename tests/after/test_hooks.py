"""on_cycle_end: the operator's command after every saved cycle, filtered by notify_on, bounded,
scrubbed of secrets, and never able to change how the cycle ended."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from tests.cli.helpers import done, echo, run_cycle
from tests.helpers import configure, cycle_records

STATE = {
    "goals": [],
    "current_task": "one",
    "pending_actions": ["two"],
    "completed_tasks": [],
    "notes": "",
    "last_updated": None,
}
# A hook in Python: writes what it was given (stdin, cwd, environment) to hook_out.json in its cwd.
RECORDER = (
    "import json, os, sys; json.dump({'stdin': sys.stdin.read(), 'cwd': os.getcwd(), "
    "'env': dict(os.environ)}, open('hook_out.json', 'w'))"
)


def cycle_log(home: Path) -> str:
    return "\n".join(p.read_text() for p in sorted((home / "logs").glob("cycle_*.log")))


def test_the_hook_gets_the_index_record_on_stdin_and_runs_in_the_home(home):
    configure(home, STATE, on_cycle_end=[sys.executable, "-c", RECORDER])
    result = run_cycle(home, [echo("hi"), done("did one")], "--json")
    assert result.exit_code == 0, result.output
    seen = json.loads((home / "hook_out.json").read_text())
    record = json.loads(seen["stdin"])
    index = cycle_records(home)
    assert record.pop("health") == {"state": "ok", "needs_person": False, "attention": []}  # as fleet judges it
    assert record == index[-1] and record["stop_reason"] == "done" and record["task_after"] == "two"
    assert Path(seen["cwd"]).resolve() == home.resolve()
    assert seen["env"]["AGENT_CYCLE_ID"] == record["cycle_id"] and seen["env"]["AGENT_STOP_REASON"] == "done"
    assert seen["env"]["AGENT_EXIT_CODE"] == "0" and Path(seen["env"]["AGENT_HOME"]).resolve() == home.resolve()
    assert "on_cycle_end: " in cycle_log(home) and "exited 0" in cycle_log(home)


def test_the_hook_environment_holds_no_secret(home, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-never-reach-the-hook")
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-should-never-reach-the-hook")
    monkeypatch.setenv("PLAIN_SETTING", "visible")
    configure(home, STATE, on_cycle_end=[sys.executable, "-c", RECORDER])
    assert run_cycle(home, [done("ok")]).exit_code == 0
    env = json.loads((home / "hook_out.json").read_text())["env"]
    assert "OPENAI_API_KEY" not in env and "MY_SERVICE_TOKEN" not in env and env["PLAIN_SETTING"] == "visible"


@pytest.mark.parametrize(
    "notify_on, replies, runs",
    [
        (["error", "max_iterations"], [done("ok")], False),
        (["done"], [done("ok")], True),
        (["error"], [], True),  # the script has no reply: the cycle fails
    ],
)
def test_notify_on_chooses_the_stop_reasons_that_run_the_hook(home, notify_on, replies, runs):
    configure(home, STATE, on_cycle_end=[sys.executable, "-c", RECORDER], notify_on=notify_on)
    run_cycle(home, replies)
    assert (home / "hook_out.json").exists() is runs


@pytest.mark.parametrize(
    "argv, problem",
    [
        ([sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"], "exit 3"),
        (["/nonexistent/alert-program"], "program not found"),
        ([sys.executable, "-c", "import time; time.sleep(60)"], "timed out after 0.5s"),
    ],
)
def test_a_failing_hook_is_logged_and_never_changes_the_exit_code(home, argv, problem):
    configure(home, STATE, on_cycle_end=argv, hook_timeout=0.5)
    started = time.monotonic()
    result = run_cycle(home, [done("ok")], "--json")
    assert result.exit_code == 0, result.output
    assert time.monotonic() - started < 30
    assert json.loads(result.stdout)["stop_reason"] == "done"
    log = cycle_log(home)
    assert "on_cycle_end failed" in log and problem in log
    if problem == "exit 3":
        assert "boom" in log  # what it printed, for the operator


@pytest.mark.slow
def test_a_hook_that_times_out_has_its_whole_process_group_killed(home):
    marker = home / "child_survived"
    child = f"import time; time.sleep(3); open({str(marker)!r}, 'w')"
    parent = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {child!r}]); time.sleep(60)"
    configure(home, STATE, on_cycle_end=[sys.executable, "-c", parent], hook_timeout=0.5)
    assert run_cycle(home, [done("ok")]).exit_code == 0
    assert "timed out" in cycle_log(home)
    time.sleep(4)  # not synchronisation: proving a killed child never acts
    assert not marker.exists()


@pytest.mark.parametrize(
    "config, needle",
    [
        ({"on_cycle_end": []}, "on_cycle_end"),
        ({"on_cycle_end": "echo hi"}, "on_cycle_end"),  # a shell string, not an argv list
        ({"notify_on": ["sometimes"]}, "notify_on"),
        ({"hook_timeout": 0}, "hook_timeout"),
        ({"incident_close_after": 0}, "incident_close_after"),
        ({"quiet_resolved": "sometimes"}, "quiet_resolved"),
    ],
)
def test_bad_hook_settings_are_usage_errors_and_nothing_runs(home, config, needle):
    configure(home, STATE, **config)
    result = run_cycle(home, [done("ok")])
    assert result.exit_code == 2 and needle in result.stderr and len(result.stderr.splitlines()) == 1
    assert "Traceback" not in result.stderr and not (home / "logs").exists()


def test_a_failing_hook_is_shown_by_status_until_it_works_again(home, tmp_path, monkeypatch):
    from tests.helpers import run_cli

    monkeypatch.setenv("AGENT_IDLE", "skip")  # idle cycles run the hook too, and write no log
    hook = tmp_path / "notify.sh"
    configure(home, {"current_task": "one"}, on_cycle_end=[str(hook)])
    assert run_cycle(home, [done("one")]).exit_code == 0  # the program does not exist yet
    assert json.loads(run_cycle(home, [], "--json").stdout)["stop_reason"] == "idle"
    first = cycle_records(home)[0]["cycle_id"]
    out = run_cli("status", "--home", str(home)).stdout
    [line] = [line for line in out.splitlines() if line.startswith("hook:")]
    assert line == f"hook:      on_cycle_end failing since cycle {first}: program not found: {hook}"
    hook.write_text("#!/bin/sh\nexit 3\n")
    hook.chmod(0o755)
    run_cycle(home, [])
    status = json.loads(run_cli("status", "--home", str(home), "--json").stdout)["outlets"]["on_cycle_end"]
    assert status == {"problem": "exit 3", "since": first}  # another problem, the same outage
    hook.write_text("#!/bin/sh\nexit 0\n")
    run_cycle(home, [])
    assert "hook:" not in run_cli("status", "--home", str(home)).stdout
    hook.write_text("#!/bin/sh\nexit 1\n")
    run_cycle(home, [])
    assert "hook:" in run_cli("status", "--home", str(home)).stdout
    (home / "config.yaml").write_text("idle: skip\n")  # a hook no longer configured is never shown
    assert "hook:" not in run_cli("status", "--home", str(home)).stdout
