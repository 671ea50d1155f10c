"""Incidents: each problem a person must act on is told once (the --quiet line cron mails, the
notify_on hook) and shown in `status` until it clears; a spent budget once per budget period."""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path

import pytest

from agent.after.incidents import (
    act_on,
    first_to_report,
    incident_key,
    incident_run,
    kind_from_text,
    open_incident,
)
from agent.config import load_settings
from agent.cycle.run import run_cycle as cycle_in_process
from agent.memory.inbox import queue_edit
from agent.models.scripted import ScriptedModel
from agent.store.cycles import add_record, record_of
from agent.store.db import records
from agent.store.home import Home
from tests.cli.helpers import done, echo, run_cycle
from tests.helpers import configure, cycle_records, run_cli, write_active

WRITE = {"tool": "write_file", "args": {"path": "report.txt", "content": "hello"}}


def rec(reason: str, code: int, **fields) -> dict:
    return {"stop_reason": reason, "exit_code": code, "task_after": "t", **fields}


# ------------------------------------------------------------------------------------ the keys


def test_an_older_records_error_text_is_read_back_into_its_kind():
    assert kind_from_text("ModelUnavailable: model request failed: HTTP 503: Error code: 503 - boom") == "http_5xx"
    assert kind_from_text("ModelError: model request failed: HTTP 401: Error code: 401 - bad key") == "http_401"
    assert kind_from_text("ModelError: model request failed: HTTP 404: The model `m` does not exist") == (
        "model_not_found"
    )
    assert kind_from_text("ModelUnavailable: cannot reach the model endpoint x: [Errno 111] Connection refused") == (
        "refused"
    )
    assert kind_from_text("ModelUnavailable: model request timed out after 30s (2 retries)") == "timeout"
    assert kind_from_text("Interrupted: interrupted by SIGTERM") == "interrupted"
    assert kind_from_text("InvariantViolation: notes too long") == "invariant"
    assert kind_from_text("KeyError: 'x'") == "bug"


def test_one_stop_reason_on_one_task_of_one_kind_at_one_endpoint_is_one_incident():
    outage = rec("error", 4, error="h:1 answered HTTP 503: busy", error_kind="http_5xx", error_endpoint="h:1")
    assert incident_key(outage) == incident_key(dict(outage, error="h:1 answered HTTP 502: <html>random words"))
    assert incident_key(outage) != incident_key(dict(outage, error_kind="http_401"))
    assert incident_key(outage) != incident_key(dict(outage, error_endpoint="h:2"))
    assert incident_key(outage) != incident_key(dict(outage, task_after="another task"))
    stall = rec("stalled", 9)
    assert incident_key(stall) == incident_key(rec("held", 9, held_for="stalled"))
    assert incident_key(stall) != incident_key(dict(stall, task_after="u"))
    park = rec("awaiting_approval", 8, signature="call 3")
    assert incident_key(park) == incident_key(rec("held", 8, held_for="awaiting_approval", signature="call 3"))
    assert incident_key(park) != incident_key(dict(park, signature="call 4"))
    spent = rec("budget_exhausted", 10, signature="daily token budget, UTC day 2026-11-24")
    assert incident_key(spent) == incident_key(dict(spent, task_after="any task"))  # a budget is no task's
    assert incident_key(spent) != incident_key(dict(spent, signature="daily token budget, UTC day 2026-11-25"))


@pytest.mark.parametrize("reason, code", [("done", 0), ("max_iterations", 3), ("idle", 0), ("held", 0)])
def test_an_outcome_no_one_must_act_on_is_no_incident(reason, code):
    assert incident_key(rec(reason, code)) is None


def test_the_first_cycle_of_an_incident_reports_it_and_idle_cycles_neither_continue_nor_end_it():
    outage = rec("error", 4, error="ModelError: HTTP 503")
    older = [rec("idle", 0), outage, rec("idle", 0), outage, rec("done", 0)]  # newest first
    run = incident_run(older, incident_key(outage))
    assert len(run) == 2 and not first_to_report(outage, run, act_on)
    ended = incident_run([rec("done", 0), outage], incident_key(outage), close_after=1)
    assert first_to_report(outage, ended, act_on)


def test_an_incident_not_over_yet_is_open_while_closing_for_a_view_that_asks():
    outage = rec("error", 4, error="down", error_kind="refused", error_endpoint="h:1", cycle_id="c1")
    recovering = [rec("done", 0, cycle_id="c3"), rec("idle", 0), rec("done", 0, cycle_id="c2"), outage]
    assert open_incident(recovering) is None  # the newest worked cycle is not part of it
    found = open_incident(recovering, close_after=3, closing=True)
    assert (found["since"], found["closing"], found["kind"]) == ("c1", 2, "refused")
    assert open_incident(recovering, close_after=2, closing=True) is None  # over: 2 cycles without it


def test_an_incident_lasts_through_fewer_good_cycles_than_incident_close_after():
    outage = rec("error", 4, error="down", error_kind="refused", error_endpoint="h:1")
    flapping = [rec("done", 0), rec("done", 0), outage, rec("done", 0), outage]  # newest first
    assert len(incident_run(flapping, incident_key(outage), close_after=3)) == 2
    assert incident_run(flapping, incident_key(outage), close_after=2) == []


def test_a_channel_that_takes_only_held_cycles_reports_the_first_held_one():
    stall, held = rec("stalled", 9), rec("held", 9, held_for="stalled")
    wants_held = lambda r: r["stop_reason"] == "held"  # noqa: E731 (notify_on: [held])
    assert first_to_report(held, [stall], wants_held)
    assert not first_to_report(held, [held, stall], wants_held)


# ----------------------------------------------------------------------------- in real cycles


def quiet(home: Path, replies: list) -> tuple[int, list[str]]:
    """One `agent run --quiet` tick: (its exit code, the lines cron would mail)."""
    result = run_cycle(home, replies, "--quiet")
    assert result.stdout == ""
    return result.exit_code, result.stderr.splitlines()


def test_a_stall_mails_one_line_and_the_held_ticks_after_it_none(home):
    configure(home, {"current_task": "fix the build"}, stall_cycles=2, max_iterations=1)
    ticks = [quiet(home, [echo("thinking")]) for _ in range(2)] + [quiet(home, []) for _ in range(3)]
    assert [code for code, _ in ticks] == [3, 9, 9, 9, 9]
    assert [len(lines) for _, lines in ticks] == [0, 1, 0, 0, 0]


def test_a_failure_mails_once_per_incident_and_again_after_it_closed(home):
    configure(home, {"current_task": "fix the build"}, incident_close_after=2)
    ticks = [quiet(home, []) for _ in range(3)]  # the script ends at once: the same failure each tick
    assert [code for code, _ in ticks] == [4, 4, 4] and [len(lines) for _, lines in ticks] == [1, 0, 0]
    for _ in range(2):  # another outcome, incident_close_after times: the incident is over
        code, lines = quiet(home, ["not json at all"] * 3 + [echo("x")])
        assert code in (3, 4)
    code, lines = quiet(home, [])
    assert code == 4 and len(lines) == 1  # the failure again after it cleared: a new incident


def test_a_parked_call_mails_once_and_a_second_call_parked_later_mails_again(home):
    configure(home, {"current_task": "write two reports"}, approval_required=["write_file"], workspace="workspace")
    (home / "workspace").mkdir()
    assert quiet(home, [WRITE]) == (8, [quiet_line_for(home, 1)])
    assert quiet(home, []) == (8, [])  # held: still call 1
    assert run_cli("approve", "1", "--home", str(home)).exit_code == 0
    second = {"tool": "write_file", "args": {"path": "second.txt", "content": "x"}}
    code, lines = quiet(home, [second])
    assert code == 8 and len(lines) == 1 and "call 2 to write_file" in lines[0]


def quiet_line_for(home: Path, call: int) -> str:
    record = cycle_records(home)[-1]
    return (
        f"agent: cycle {record['cycle_id']} awaiting approval: call {call} to write_file awaits the operator "
        f"(agent approve {call} / agent deny {call}) (exit 8; `agent approvals` lists them)"
    )


def test_a_spent_budget_mails_one_line_per_budget_period(home, tmp_path):
    """In-process cycles with a clock: two ticks on each of two UTC days, a budget spent on both."""
    configure(home, {"current_task": "count"}, daily_token_budget=10)
    lines = []

    def tick(day: int) -> None:
        now = _dt.datetime(2026, 11, day, 12, 0, tzinfo=_dt.timezone.utc)
        spent = {"cycle_id": f"202611{day:02}_110000_01", "started": now.replace(hour=11).isoformat()}
        if not record_of(Home.at(home), spent["cycle_id"])[0]:  # what that day's earlier cycles spent
            add_record(
                Home.at(home),
                dict(spent, stop_reason="done", exit_code=0, usage={"total_tokens": 50}, model="scripted"),
            )
        report = cycle_in_process(Home.at(home), load_settings(home), ScriptedModel.from_replies([]), clock=lambda: now)
        assert report.exit_code == 10
        from agent.cli.progress import quiet_line

        lines.append(quiet_line(report))

    for day in (24, 24, 25, 25):
        tick(day)
    assert [line is not None for line in lines] == [True, False, True, False]
    assert "UTC day 2026-11-24" in lines[0] and "UTC day 2026-11-25" in lines[2]


def test_notify_on_runs_the_hook_once_per_incident(home, tmp_path):
    calls = tmp_path / "hook.log"
    hook = tmp_path / "hook.sh"
    hook.write_text(f'#!/bin/sh\necho "$AGENT_STOP_REASON" >> "{calls}"\n')
    hook.chmod(0o755)
    configure(
        home,
        {"current_task": "fix the build"},
        stall_cycles=2,
        max_iterations=1,
        on_cycle_end=[str(hook)],
        notify_on=["stalled", "error"],
    )
    for replies in ([echo("a")], [echo("b")], [], [], []):
        run_cycle(home, replies)
    assert calls.read_text().split() == ["stalled"]  # not on the held ticks after it


def test_notify_on_held_runs_the_hook_at_the_first_held_cycle(home, tmp_path):
    calls = tmp_path / "hook.log"
    hook = tmp_path / "hook.sh"
    hook.write_text(f'#!/bin/sh\necho "$AGENT_STOP_REASON" >> "{calls}"\n')
    hook.chmod(0o755)
    configure(
        home, {"current_task": "fix"}, stall_cycles=1, max_iterations=1, on_cycle_end=[str(hook)], notify_on=["held"]
    )
    for replies in ([echo("a")], [], [], []):
        run_cycle(home, replies)
    assert calls.read_text().split() == ["held"]


def test_without_notify_on_the_hook_runs_after_every_cycle(home, tmp_path):
    calls = tmp_path / "hook.log"
    hook = tmp_path / "hook.sh"
    hook.write_text(f'#!/bin/sh\necho "$AGENT_STOP_REASON" >> "{calls}"\n')
    hook.chmod(0o755)
    configure(home, {"current_task": "fix"}, stall_cycles=1, max_iterations=1, on_cycle_end=[str(hook)])
    for replies in ([echo("a")], [], []):
        run_cycle(home, replies)
    assert calls.read_text().split() == ["stalled", "held", "held"]


def test_status_shows_the_open_incident_until_it_clears(home):
    configure(home, {"current_task": "fix the build", "pending_actions": ["deploy"]}, stall_cycles=1, max_iterations=1)
    run_cycle(home, [echo("a")])
    run_cycle(home, [])
    out = run_cli("status", "--home", str(home)).stdout
    [line] = [line for line in out.splitlines() if line.startswith("incident:")]
    assert 'stalled on task "fix the build"' in line and "2 cycle(s); held" in line
    data = json.loads(run_cli("status", "--home", str(home), "--json").stdout)["incident"]
    assert data["stop_reason"] == "stalled" and data["cycles"] == 2 and data["held"] is True
    queue_edit(Home.at(home), {"op": "goal_add", "text": "g"})
    run_cycle(home, [done("fixed")])
    assert "incident:" not in run_cli("status", "--home", str(home)).stdout
    assert json.loads(run_cli("status", "--home", str(home), "--json").stdout)["incident"] is None


def test_open_incident_reads_back_only_as_far_as_the_incident_goes():
    outage = rec("error", 4, error="ModelError: HTTP 503", cycle_id="c3")

    def records():
        yield dict(outage, cycle_id="c5")
        yield rec("idle", 0, cycle_id="c4")
        yield outage
        yield rec("done", 0, cycle_id="c2")
        raise AssertionError("read past the record that ends the incident")

    found = open_incident(records(), close_after=1)
    assert (found["since"], found["cycles"], found["last"]) == ("c3", 2, "c5")


def test_a_hostile_task_is_one_escaped_line_in_status(home):
    write_active(home, {"current_task": "fix\nthe \x1b[2J build"})
    configure(home, stall_cycles=1, max_iterations=1)
    run_cycle(home, [echo("a")])
    out = run_cli("status", "--home", str(home)).stdout
    [line] = [line for line in out.splitlines() if line.startswith("incident:")]
    assert "\x1b" not in out and "\\n" in line


def test_a_stall_is_one_incident_however_the_model_words_its_task():
    stalled = {"stop_reason": "stalled", "exit_code": 9, "task_id": "c1", "task_after": "Fix it (attempt 2)"}
    held = {"stop_reason": "held", "held_for": "stalled", "exit_code": 9, "task_id": "c1", "task_after": "Fix it (v3)"}
    assert incident_key(stalled) == incident_key(held) is not None
    assert incident_key(dict(stalled, task_id="c9")) != incident_key(stalled)  # another task: another incident


def test_a_stall_that_spans_the_upgrade_stays_one_incident(home):
    (home / "config.yaml").write_text("stall_cycles: 2\nmax_iterations: 1\n")
    write_active(home, {"current_task": "fix the build"})
    assert [run_cycle(home, [echo("looking")]).exit_code for _ in range(2)] == [3, 9]
    db = records(Home.at(home))
    with db.write():  # as the previous release wrote them: no identity, no streak
        db.execute("UPDATE cycle SET record = json_remove(record, '$.task_id', '$.task_id_before', '$.streak')")
    held = run_cycle(home, [], "--quiet")
    assert held.exit_code == 9 and held.stderr == ""  # the same incident: nothing more to mail
    stalled, held_record = cycle_records(home)[-2:]
    assert incident_key(stalled) == incident_key(held_record) and held_record["stop_reason"] == "held"
