"""Exact transcripts: logs/agent.db holds every request and reply of a cycle, redacted and
bounded, committed as each is made, and gone when retention removes its cycle."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from agent.config import Settings
from agent.cycle import prompt
from agent.cycle.run import run_cycle
from agent.models import ScriptedModel
from agent.store.db import records
from agent.store.home import Home
from agent.tools import build_registry
from tests.cli.helpers import done, echo
from tests.helpers import run_cli, stored_bytes, transcript, write_active, write_script

STATE = {
    "goals": [],
    "current_task": "say hi",
    "pending_actions": [],
    "completed_tasks": [],
    "notes": "",
    "last_updated": None,
}


def transcribed(home: Path) -> list[str]:
    """The ids of the cycles with a transcript."""
    return [c for (c,) in records(Home.at(home)).rows("SELECT DISTINCT cycle_id FROM transcript ORDER BY cycle_id")]


def cycle(home: Path, replies: list, **settings) -> tuple:
    report = run_cycle(Home(home), Settings(**{"idle": "run", **settings}), ScriptedModel.from_replies(replies))
    return report, transcript(home, report.cycle_id)


def test_every_request_and_reply_is_recorded_in_order_with_what_was_sent(home):
    write_active(home, STATE)
    replies = [echo("hi"), "not json at all", done("said hi")]
    report, records = cycle(home, replies)

    assert [r["call"] for r in records] == [1, 2, 3] and report.iterations == 3
    assert [r["reply"] for r in records] == [json.dumps(echo("hi")), "not json at all", json.dumps(done("said hi"))]
    system = prompt.system_prompt(prompt.read_rules(home / "rules.md"), build_registry(Settings()))
    for n, record in enumerate(records, 1):
        assert record["purpose"] == "action" and record["elapsed_s"] >= 0
        assert [m["role"] for m in record["messages"]] == ["system", "user"]
        assert record["messages"][0]["content"] == system
        assert f"Iteration {n} of 10." in record["messages"][1]["content"]
    assert "[TOOL] echo" in records[1]["messages"][1]["content"]  # the second request saw the first result


def test_each_prompt_shows_every_note_once_and_the_last_result_last(home):
    write_active(home, {**STATE, "notes": "an older note"})
    _, records = cycle(home, [echo("first"), echo("second"), done("said both")])
    notes = yaml.safe_load((home / "scratchpad" / "active.yaml").read_text())["notes"].splitlines()
    assert notes[0] == "an older note" and notes[1].startswith("[TOOL] echo") and notes[2].endswith("-> second")
    for n, record in enumerate(records):  # request n knows the older note and the notes of n actions
        user = record["messages"][-1]["content"]
        assert [user.count(line) for line in notes[: n + 1]] == [1] * (n + 1), user
        assert f"Last result: {notes[n] if n else 'none yet'}" in user


def test_the_reflect_call_is_recorded_as_reflect(home):
    write_active(home, STATE)
    _, records = cycle(home, [done("ok"), {"tool": "curate_notes", "args": {"notes": "APPEND: learned"}}], reflect=True)
    assert [r["purpose"] for r in records] == ["action", "reflect"]
    assert "curate_notes" in records[1]["reply"]


def test_a_failed_request_is_recorded_with_its_error(home):
    write_active(home, STATE)
    report, records = cycle(home, [echo("hi")])  # the script runs out on the second request
    assert report.exit_code == 4
    assert "reply" not in records[-1] and records[-1]["error"].startswith("ScriptEnded")
    assert records[-1]["messages"][1]["content"]


def test_secrets_are_redacted_in_the_transcript(home, monkeypatch):
    secret = "hunter2-very-secret-value"
    monkeypatch.setenv("MY_SECRET", secret)
    write_active(home, dict(STATE, notes=f"password {secret}"))
    report, records = cycle(home, [echo(secret), done("ok")], secret_env=["MY_SECRET"])
    assert secret.encode() not in stored_bytes(home) and "[REDACTED]" in records[0]["reply"]


def test_the_transcript_is_cut_at_transcript_max_bytes_with_one_marker_record(home):
    write_active(home, STATE)
    report, records = cycle(home, [echo(str(i)) for i in range(6)] + [done("ok")], transcript_max_bytes=12000)
    assert sum(len(json.dumps(r, ensure_ascii=False).encode()) + 1 for r in records) <= 12000
    assert "cut" in records[-1] and all("cut" not in r for r in records[:-1])
    assert report.exit_code == 0  # a cut transcript changes nothing else


def test_transcript_max_bytes_zero_writes_no_transcript(home):
    write_active(home, STATE)
    report = run_cycle(Home(home), Settings(transcript_max_bytes=0), ScriptedModel.from_replies([done("ok")]))
    assert report.exit_code == 0
    assert transcribed(home) == []


def test_a_negative_transcript_max_bytes_is_a_usage_error(home):
    (home / "config.yaml").write_text("transcript_max_bytes: -1\n")
    script = write_script(home.parent, [done("ok")])
    result = run_cli("run", "--home", str(home), "--model", f"scripted:{script}")
    assert result.exit_code == 2 and "transcript_max_bytes" in result.stderr
    assert not (home / "logs").exists()


def test_retention_deletes_a_transcript_with_its_cycle(home):
    write_active(home, STATE)
    first, _ = cycle(home, [done("ok")], keep_cycles=1)
    second, _ = cycle(home, [done("ok")], keep_cycles=1)
    assert transcribed(home) == [second.cycle_id] and first.cycle_id < second.cycle_id


def test_prune_and_reset_clean_remove_transcripts(home):
    write_active(home, STATE)
    for _ in range(3):
        cycle(home, [done("ok")])
    assert run_cli("prune", "--home", str(home), "--keep", "1").exit_code == 0
    assert len(transcribed(home)) == 1
    assert run_cli("reset", "--home", str(home), "--clean", "--yes").exit_code == 0
    assert transcribed(home) == []
    assert yaml.safe_load((home / "scratchpad" / "active.yaml").read_text())["completed_tasks"] == []
