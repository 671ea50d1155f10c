"""`agent memory`: the sections shown with their fill, and edited as the operator (read-only ones
too), at once or, while a real cycle holds the lock, queued for the next wake and never lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest

from agent.common.outcomes import ExitCode
from tests.cli.helpers import done, run_cycle
from tests.helpers import read_active, run_cli, snapshots, tree_digest, wait_for, write_script
from tests.memory.homes import SECTIONS, archived_sections, entry, known, notes, texts, with_sections
from tests.models.openai_server import OpenAIServer, Reply

STATE = {
    "current_task": "work",
    "purpose": "Keep the NAS alive",
    "known": [entry("known-1", "The NAS is at 10.0.0.5", days=3), entry("known-2", "Backups at 02:00", by="operator")],
    "section_ids": {"known": 2},
}


def memory(home, *args: str):
    return (
        run_cli("memory", *args, "--home", str(home))
        if not args or args[0] == "--json"
        else run_cli("memory", args[0], "--home", str(home), *args[1:])
    )


def test_memory_shows_each_section_with_its_fill_the_most_stable_first(home):
    with_sections(home, STATE)
    result = memory(home)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "purpose (18/200 characters, read-only)  What this agent is for."
    assert lines[1] == "  Keep the NAS alive"
    assert lines[2] == "now (0/120 characters)  What I am doing."
    assert "known (2/4)  Facts I am sure of." in lines
    assert "  known-1  3 days           The NAS is at 10.0.0.5" in lines
    assert "  known-2  1 day  operator Backups at 02:00" in lines
    assert "tell (0/3, surface)  What a person should know." in lines


def test_memory_json_lists_every_section_with_its_entries(home):
    with_sections(home, STATE)
    data = json.loads(memory(home, "--json").stdout)
    assert [s["name"] for s in data["sections"]] == ["purpose", "now", "known", "unknown", "tell"]
    known_section = data["sections"][2]
    assert known_section["fill"] == "2/4" and known_section["entries"] == STATE["known"]
    assert data["sections"][0]["text"] == "Keep the NAS alive" and data["warnings"] == []


def test_a_home_without_sections_says_so(home):
    with_sections(home, {"current_task": "x"}, sections={})
    result = memory(home)
    assert result.exit_code == 0 and "config.yaml defines no sections" in result.stdout


def test_add_drop_and_set_write_as_the_operator_and_archive_what_leaves(home):
    with_sections(home, STATE)
    assert memory(home, "add", "known", "The VPN uses WireGuard").exit_code == 0
    assert memory(home, "drop", "known", "known-1").exit_code == 0
    assert memory(home, "set", "purpose", "Keep the NAS and the printer alive").exit_code == 0  # read-only: ours
    assert memory(home, "add", "now", "first line").exit_code == 0
    state = read_active(home)
    added = state["known"][-1]
    assert (added["id"], added["by"], added["text"]) == ("known-3", "operator", "The VPN uses WireGuard")
    assert state["purpose"] == "Keep the NAS and the printer alive" and state["now"] == "first line"
    assert [(r["section"], r.get("id"), r["reason"]) for r in archived_sections(home)] == [
        ("known", "known-1", "drop"),
        ("purpose", None, "set"),
    ]


def test_the_operator_restating_a_model_entry_makes_it_theirs(home):
    with_sections(home, STATE)
    result = memory(home, "add", "known", "the nas is at 10.0.0.5", "--json")
    assert json.loads(result.stdout)["message"].startswith("known: restated known-1 (")
    assert json.loads(result.stdout)["message"].endswith(", now the operator)")
    assert read_active(home)["known"][0]["by"] == "operator" and len(read_active(home)["known"]) == 2


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["add", "nothere", "x"],
            "there is no section 'nothere' in config.yaml (sections: purpose, now, known, unknown, tell)",
        ),
        (["add", "known", "two\nlines"], "section 'known': an entry is one line"),
        (["add", "known", "x" * 61], "section 'known': an entry holds at most 60 characters; this one is 61"),
        (["add", "known", "   "], "the text is empty"),
        (["add", "tell", "\u200b"], "section 'tell': nothing to add after 'APPEND:'"),
        (["set", "known", "x"], "section 'known' is a list: use add and drop"),
        (["drop", "now", "now-1"], "section 'now' is text: use add and set"),
        (["set", "now", "x" * 121], "section 'now' holds at most 120 characters; this text is 121"),
        (["drop", "known", "known-9"], "section 'known' has no entry 'known-9' (its ids: known-1, known-2)"),
        (["add", "known", "caf\udcff"], "the text is not valid UTF-8 text (byte 0xff at character 4)"),
    ],
    ids=[
        "no-section",
        "two-lines",
        "too-long",
        "empty",
        "invisible",
        "set-a-list",
        "drop-a-text",
        "text-too-long",
        "no-id",
        "not-utf8",
    ],
)
def test_a_bad_edit_is_one_line_exit_2_and_writes_nothing(home, args, message):
    with_sections(home, STATE)
    before = tree_digest(home)
    result = memory(home, *args)
    assert result.exit_code == ExitCode.USAGE, result.output
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert tree_digest(home) == before


def test_a_changed_kind_refuses_every_memory_command(home):
    with_sections(home, {**STATE, "known": "now a text"})
    for args in ([], ["add", "known", "x"]):
        result = memory(home, *args)
        assert result.exit_code == ExitCode.USAGE and "its kind changed" in result.stderr


@pytest.mark.parametrize("command", [["task", "add"], ["goal", "add"], ["memory", "add", "known"]])
def test_command_line_text_that_is_not_utf8_is_refused_in_one_line_by_a_real_process(home, command):
    with_sections(home, STATE)
    before = tree_digest(home)
    argv = [
        sys.executable.encode(),
        b"-m",
        b"agent",
        *(a.encode() for a in command),
        b"caf\xff",
        b"--home",
        bytes(home),
    ]
    env = {k: v for k, v in os.environ.items() if k not in ("AGENT_HOME", "AGENT_MODEL")} | {"LC_ALL": "C.UTF-8"}
    result = subprocess.run(argv, capture_output=True, env=env, timeout=60)
    assert result.returncode == ExitCode.USAGE, result.stderr
    assert b"is not valid UTF-8 text (byte 0xff at character 4)" in result.stderr
    assert b"Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert tree_digest(home) == before


def test_an_edit_while_a_real_cycle_holds_the_lock_is_queued_and_applied_at_the_next_wake(home):
    with_sections(home, STATE, tool_calling="text", max_retries=1, request_timeout=60)
    release = threading.Event()

    def answer(request) -> Reply:  # the cycle's model call waits here, holding the home's lock
        release.wait(60)
        return Reply.chat(done("worked"))

    env = {k: v for k, v in os.environ.items() if k not in ("AGENT_HOME", "AGENT_MODEL")}
    with OpenAIServer(default=answer) as server:
        env |= {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-test"}
        cycle = subprocess.Popen(
            [sys.executable, "-m", "agent", "run", "--home", str(home), "--model", "openai:test-model"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            wait_for(lambda: server.chat_requests, "the cycle to ask its model (it holds the lock)")
            queued = json.loads(memory(home, "add", "known", "Mail goes through smtp.example.org", "--json").stdout)
            dropped = memory(home, "drop", "known", "known-1")
            read_only = memory(home, "set", "purpose", "Keep the NAS, the printer and the mail alive")
        finally:
            release.set()
            cycle.wait(60)
    assert queued["queued"] is True and queued["edit"]["op"] == "memory_add"
    assert "a cycle is running: queued for the next wake: memory drop known known-1" in dropped.stdout
    assert read_only.exit_code == 0 and cycle.returncode == 0, cycle.stderr
    assert texts(home, "known") == ["The NAS is at 10.0.0.5", "Backups at 02:00"]  # not yet: the cycle saved its own
    assert run_cycle(home, [done("ok")]).exit_code == 0  # the next wake applies them, in order
    state = read_active(home)
    assert [(e["id"], e["by"], e["text"]) for e in state["known"]] == [
        ("known-2", "operator", "Backups at 02:00"),
        ("known-3", "operator", "Mail goes through smtp.example.org"),
    ]
    assert state["purpose"] == "Keep the NAS, the printer and the mail alive"
    assert [r.get("id") for r in archived_sections(home)] == ["known-1", None]
    assert "Mail goes through" in snapshots(home, "before")[-1].read_text()  # applied at wake, before the snapshot


def test_a_queued_edit_that_no_longer_fits_becomes_an_inbox_note(home):
    from agent.store.home import Home
    from agent.store.lock import home_lock

    with_sections(home, {**STATE, "known": known("a"), "section_ids": {"known": 1}})
    with home_lock(Home.at(home)):
        assert memory(home, "drop", "known", "known-1").exit_code == 0
        assert memory(home, "drop", "known", "known-1").exit_code == 0  # the second finds it gone
    assert run_cycle(home, [done("ok")]).exit_code == 0
    assert texts(home, "known") == []
    assert any(
        n.startswith("[INBOX] queued edit not applied: memory drop known known-1: section 'known' has no entry")
        for n in notes(home)
    )
    assert [r["id"] for r in archived_sections(home)] == ["known-1"]


# ------------------------------------------------------------------------------------ surface


TELL = [entry("tell-1", "The backup disk is 95% full"), entry("tell-2", "Renew the TLS certificate \x1b[31mby Friday")]


def test_surfaced_entries_are_in_status_the_hooks_record_and_the_metrics(home):
    from tests.after.test_metrics import samples

    hook = home / "hook.py"
    hook.write_text("import sys, pathlib\npathlib.Path(sys.argv[1]).write_text(sys.stdin.read())\n")
    received = home / "received.json"
    state = {**STATE, "tell": TELL, "section_ids": {"known": 2, "tell": 2}}
    with_sections(home, state, metrics_file="agent.prom", on_cycle_end=[sys.executable, str(hook), str(received)])
    assert (
        run_cycle(home, [{"tool": "update_scratchpad", "args": {"tell": "REMOVE: tell-1"}}, done("ok")]).exit_code == 0
    )
    record = json.loads(received.read_text())
    assert record["surfaced"] == {
        "count": 1,
        "entries": [{"section": "tell", "id": "tell-2", "text": "Renew the TLS certificate \x1b[31mby Friday"}],
    }
    assert samples((home / "agent.prom").read_text())[("agent_surfaced_entries", ())] == 1
    status = run_cli("status", "--home", str(home))
    assert "tell:      [tell tell-2] Renew the TLS certificate \\x1b[31mby Friday" in status.stdout
    assert "\x1b[31m" not in status.stdout
    data = json.loads(run_cli("status", "--home", str(home), "--json").stdout)
    assert data["surfaced"] == [
        {"section": "tell", "id": "tell-2", "text": "Renew the TLS certificate \x1b[31mby Friday"}
    ]


def test_an_idle_cycles_record_says_what_is_surfaced_too(home, monkeypatch):
    from tests.after.test_metrics import samples

    monkeypatch.delenv("AGENT_IDLE")
    with_sections(home, {**STATE, "current_task": None, "tell": TELL}, metrics_file="agent.prom")
    result = run_cycle(home, [], "--json")
    assert json.loads(result.stdout.splitlines()[-1])["stop_reason"] == "idle"
    assert samples((home / "agent.prom").read_text())[("agent_surfaced_entries", ())] == 2


def test_without_a_surface_section_nothing_is_added_to_the_record_or_the_status(home):
    sections = {k: v for k, v in SECTIONS.items() if k != "tell"}
    with_sections(home, STATE, sections=sections, metrics_file="agent.prom")
    result = run_cycle(home, [done("ok")], "--json")
    assert "surfaced" not in json.loads(result.stdout.splitlines()[-1])
    assert "agent_surfaced_entries" not in (home / "agent.prom").read_text()
    assert "surfaced" not in json.loads(run_cli("status", "--home", str(home), "--json").stdout)


# ------------------------------------------------------------------------------------- doctor


def doctor_memory(home) -> list[dict]:
    script = write_script(home.parent, [done("x")], name="doctor.yaml")
    result = run_cli("doctor", "--home", str(home), "--model", f"scripted:{script}", "--json")
    return [c for c in json.loads(result.stdout) if c["check"] == "memory"]


def test_doctor_says_each_section_is_within_its_limit(home):
    with_sections(home, STATE)
    (check,) = doctor_memory(home)
    assert check["ok"] and "5 section(s), each within its limit" in check["detail"]


def test_doctor_warns_of_operator_entries_over_a_lowered_limit_and_fails_a_changed_kind(home):
    with_sections(home, {**STATE, "known": ["mine 1", "mine 2", "mine 3", "mine 4", "mine 5"]})
    (check,) = doctor_memory(home)
    assert check["ok"] and check["warning"] and "section 'known' holds 5/4 entries, over its limit" in check["detail"]
    with_sections(home, {**STATE, "known": "a text"})
    (check,) = doctor_memory(home)
    assert not check["ok"] and "its kind changed" in check["detail"]


def test_entries_written_by_hand_are_shown_then_adopted_by_the_first_edit(home):
    with_sections(home, {**STATE, "known": ["Written by hand"], "tell": ["Also by hand"]})
    shown = memory(home).stdout
    assert "  (adopted at the next wake)  1 day  operator Written by hand" in shown
    assert "[tell] Also by hand" in run_cli("status", "--home", str(home)).stdout
    assert memory(home, "add", "known", "From the command line").exit_code == 0
    assert [(e["id"], e["text"]) for e in read_active(home)["known"]] == [
        ("known-3", "Written by hand"),  # STATE's counter was at 2
        ("known-4", "From the command line"),
    ]


def test_a_restored_older_state_never_issues_the_replaced_ones_ids_again(home):
    with_sections(home, {**STATE, "known": known("a"), "section_ids": {"known": 1}})
    assert run_cycle(home, [done("ok")]).exit_code == 0
    first = snapshots(home, "after")[-1].name[: -len("_after.yaml")]
    appended = {"tool": "update_scratchpad", "args": {"known": "APPEND: b"}}
    assert run_cycle(home, [appended, appended | {"args": {"known": "APPEND: c"}}, done("ok")]).exit_code == 0
    assert [e["id"] for e in read_active(home)["known"]] == ["known-1", "known-2", "known-3"]
    assert run_cli("restore", first, "--home", str(home)).exit_code == 0  # back to known-1 alone, counter 1
    assert memory(home, "add", "known", "d").exit_code == 0
    assert [e["id"] for e in read_active(home)["known"]] == ["known-1", "known-4"]  # never known-2 again
