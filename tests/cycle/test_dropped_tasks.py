"""Nothing leaves the queue without the archive: a task the model drops, renames away or replaces
with update_scratchpad is archived with its text and the cycle, found by recall, listed by
`show --all`, and said in a note the next prompt shows and in `agent status`."""

from __future__ import annotations

import json

from agent.store.archive import archived, search
from agent.store.home import Home
from tests.cli.helpers import done, run_cycle
from tests.helpers import cycle_records, read_active, run_cli, transcript, write_active

QUEUE = {
    "goals": [],
    "current_task": "Write the report",
    "pending_actions": ["Email the draft to Ana", "Book the room"],
    "completed_tasks": [],
    "notes": "",
    "last_updated": None,
}
EMPTY_THE_QUEUE = {"tool": "update_scratchpad", "args": {"current_task": None, "pending_actions": []}}


def queued_archive(home) -> list[dict]:
    return [r for r in archived(Home.at(home)) if r["kind"] == "queued_task"]


def test_a_queue_the_model_empties_is_archived_task_by_task_with_the_cycle(home):
    write_active(home, QUEUE)
    assert run_cycle(home, [EMPTY_THE_QUEUE, done("nothing left")]).exit_code == 0
    [record] = cycle_records(home)
    rows = queued_archive(home)
    assert [r["value"] for r in rows] == ["Write the report", "Email the draft to Ana", "Book the room"]
    assert {r["cycle_id"] for r in rows} == {record["cycle_id"]}
    assert record["dropped_tasks"] == ["Write the report", "Email the draft to Ana", "Book the room"]


def test_a_dropped_task_is_found_by_recall(home):
    write_active(home, QUEUE)
    run_cycle(home, [EMPTY_THE_QUEUE, done("nothing left")])
    assert [m.text for m in search(Home.at(home), "Ana draft", 5)] == ["Email the draft to Ana"]


def test_show_all_lists_the_dropped_tasks_with_their_cycle(home):
    write_active(home, QUEUE)
    run_cycle(home, [EMPTY_THE_QUEUE, done("nothing left")])
    [record] = cycle_records(home)
    out = run_cli("show", "--all", "--home", str(home)).output
    assert "archived queued tasks, left without done (3):" in out
    assert f"  - Book the room  [cycle {record['cycle_id']}: dropped by the model]" in out
    data = json.loads(run_cli("show", "--all", "--json", "--home", str(home)).output)
    assert [r["value"] for r in data["archived_queued_tasks"]] == [
        "Write the report",
        "Email the draft to Ana",
        "Book the room",
    ]


def test_the_next_prompt_says_what_the_model_dropped(home):
    write_active(home, dict(QUEUE, pending_actions=["Email the draft to Ana", "Book the room", "Water plants"]))
    drop_two = {"tool": "update_scratchpad", "args": {"pending_actions": ["Water plants"]}}
    run_cycle(home, [drop_two, done("report written")])
    run_cycle(home, [done("plants watered")])
    shown = json.dumps(transcript(home, cycle_records(home)[-1]["cycle_id"]), ensure_ascii=False)  # what the model read
    assert "the model dropped 2 queued tasks: Email the draft to Ana; Book the room" in shown


def test_status_says_what_the_model_dropped_after_the_home_went_idle(home, monkeypatch):
    monkeypatch.delenv("AGENT_IDLE")  # the default: an empty queue calls no model
    write_active(home, QUEUE)
    run_cycle(home, [EMPTY_THE_QUEUE, done("nothing left")])
    assert run_cycle(home, [done("never asked")]).exit_code == 0  # idle: the queue is empty
    assert cycle_records(home)[-1]["stop_reason"] == "idle"
    out = run_cli("status", "--home", str(home)).output
    assert "the model dropped 3 queued tasks: Write the report; Email the draft to Ana; Book the room" in out
    data = json.loads(run_cli("status", "--json", "--home", str(home)).output)
    assert data["dropped_tasks"]["tasks"] == ["Write the report", "Email the draft to Ana", "Book the room"]


def test_a_renamed_task_archives_the_old_text(home):
    write_active(home, QUEUE)
    rename = {"tool": "update_scratchpad", "args": {"pending_actions": ["Email Ana", "Book the room"]}}
    run_cycle(home, [rename, done("report written")])
    assert [r["value"] for r in queued_archive(home)] == ["Email the draft to Ana"]
    assert read_active(home)["current_task"] == "Email Ana"


def test_done_and_reordering_drop_nothing(home):
    write_active(home, QUEUE)
    reorder = {"tool": "update_scratchpad", "args": {"pending_actions": ["Book the room", "Email the draft to Ana"]}}
    run_cycle(home, [reorder, done("report written")])
    assert queued_archive(home) == [] and "dropped_tasks" not in cycle_records(home)[0]
    assert "dropped" not in read_active(home)["notes"]


def test_one_of_two_duplicate_tasks_dropped_is_archived_once(home):
    write_active(home, dict(QUEUE, pending_actions=["Book the room", "Book the room"]))
    once = {"tool": "update_scratchpad", "args": {"pending_actions": ["Book the room"]}}
    run_cycle(home, [once, done("report written")])
    assert [r["value"] for r in queued_archive(home)] == ["Book the room"]


def test_goals_the_model_replaces_are_archived_said_and_listed(home):
    write_active(home, dict(QUEUE, goals=["Keep the servers healthy", "Answer Ana's mail"]))
    replace = {"tool": "update_scratchpad", "args": {"goals": ["Answer Ana's mail", "Take over"]}}
    run_cycle(home, [replace, done("report written")])
    [record] = cycle_records(home)
    rows = [r for r in archived(Home.at(home)) if r["kind"] == "goal"]
    assert [(r["value"], r["cycle_id"], r["reason"]) for r in rows] == [
        ("Keep the servers healthy", record["cycle_id"], "dropped by the model")
    ]
    assert record["dropped_goals"] == ["Keep the servers healthy"]
    assert "the model dropped 1 goal: Keep the servers healthy" in read_active(home)["notes"]
    out = run_cli("show", "--all", "--home", str(home)).output
    assert "archived goals, dropped (1):" in out
    assert (
        f"dropped:   cycle {record['cycle_id']}: the model dropped 1 goal:"
        in run_cli("status", "--home", str(home)).output
    )


def test_the_note_lines_an_update_replaces_away_are_archived_and_the_rest_are_not(home):
    write_active(home, {**QUEUE, "notes": "The NAS is at 10.0.0.5\nkeep this"})
    replace = {"tool": "update_scratchpad", "args": {"notes": "keep this\nsomething new"}}
    assert run_cycle(home, [replace, done("ok")]).exit_code == 0
    [record] = cycle_records(home)
    rows = [r for r in archived(Home.at(home)) if r["kind"] == "note"]
    assert [(r["value"], r["reason"], r["cycle_id"]) for r in rows] == [
        ("The NAS is at 10.0.0.5", "replaced by the model", record["cycle_id"])
    ]
    assert [m.text for m in search(Home.at(home), "NAS", 5)] == ["The NAS is at 10.0.0.5"]
