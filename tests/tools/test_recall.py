"""recall, the tool: search what bounded memory archived, with refusals and a bounded answer
(the index itself is tested in tests/store/test_archive.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.common.tags import Tag
from agent.store.home import Home
from agent.tools import ToolError
from agent.tools.recall import MATCH_CHARS, RESULT_CHARS, recall
from tests.helpers import ARCHIVED_SAMPLE, archive_items, read_yaml, run_cli, write_active, write_script
from tests.tools.helpers import call, ctx_for


def ask(home: Path, query: str, limit: int = 3) -> str:
    return recall(ctx_for(home), query, limit)


def test_recall_finds_archived_notes_and_completed_tasks_best_match_first(home):
    archive_items(home, ARCHIVED_SAMPLE)
    answer = ask(home, "disk full backup")
    lines = answer.splitlines()
    assert lines[0] == "2 archived item(s), best match first:"
    assert lines[1] == "[20260101_000000] note: The backup job failed on Tuesday: disk full"
    assert "nginx" not in answer
    assert ask(home, "nginx logs") == (
        "1 archived item(s), best match first:\n[20260101_000000] completed task: "
        "Rotate the nginx logs — rotated and compressed 4 files"
    )
    assert "Check the weather" in ask(home, "WEATHER")  # case and stems do not matter
    assert ask(home, "compressing").endswith("rotated and compressed 4 files")


def test_recall_says_when_nothing_matches_or_nothing_was_archived(home):
    assert ask(home, "anything") == "nothing has been archived yet"
    assert not Home.at(home).database.exists()  # a question writes nothing
    archive_items(home, ARCHIVED_SAMPLE)
    assert ask(home, "zebra") == "no archived note or task matches 'zebra'"


HOSTILE_QUERIES = [
    '"',
    '""',
    "'",
    "NEAR(",
    "NEAR(disk backup, 2)",
    "*",
    "disk*",
    "^disk",
    "-disk",
    "+disk",
    "text:disk",
    "kind:note",
    "disk AND",
    "OR OR OR",
    "NOT",
    "(((",
    ")",
    'disk" OR "x',
    "\0disk",
    "dïsk ünïcode",
    "😀 disk",
    "a" * 10_000,
    "disk " * 5_000,
    "x" * 100_000 + " disk",
    "rowid=1; DROP TABLE entries; --",
    "{disk}",
    "disk:*",
]


@pytest.mark.parametrize("query", HOSTILE_QUERIES)
def test_hostile_queries_never_reach_fts_syntax(home, query):
    archive_items(home, ARCHIVED_SAMPLE)
    try:
        answer = ask(home, query)
    except ToolError as exc:
        assert str(exc) == "the query has no words to search for"
        return
    assert len(answer) <= RESULT_CHARS + 100
    assert ask(home, "backup").startswith("1 archived item(s)")  # the index is intact


def test_results_are_bounded_in_count_and_size(home):
    archive_items(home, [("note", f"walrus number {i} " + "blah " * 2000) for i in range(30)])
    answer = ask(home, "walrus", limit=10)
    assert len(answer) <= RESULT_CHARS + 100
    assert answer.startswith("10 archived item(s)") and "more not shown]" in answer
    assert all(len(line) <= MATCH_CHARS + 30 for line in answer.splitlines())


@pytest.mark.parametrize("limit", [0, -1, 11, 10**9])
def test_a_limit_out_of_range_is_refused(home, limit):
    archive_items(home, ARCHIVED_SAMPLE)
    with pytest.raises(ToolError, match="limit must be between 1 and 10"):
        ask(home, "disk", limit)


def test_recall_is_offered_and_its_refusals_are_tool_error_notes(home):
    archive_items(home, ARCHIVED_SAMPLE)
    kind, note = call(ctx_for(home), "recall", query="backup", limit=1)
    assert kind is Tag.TOOL and "The backup job failed" in note
    kind, note = call(ctx_for(home), "recall", query="!!!")
    assert kind is Tag.TOOL_ERROR and note.endswith("the query has no words to search for")


def test_a_model_finds_what_an_earlier_cycle_archived(home, tmp_path):
    """End to end: a cycle's notes overflow the budget into the archive; the next cycle recalls them."""
    (home / "config.yaml").write_text("notes_budget: 200\ncompleted_window: 1\n")
    write_active(home, {"current_task": "Note the capybara", "pending_actions": ["Second task", "Third task"]})
    first = write_script(
        tmp_path,
        [
            {"tool": "echo", "args": {"message": "the capybara sleeps in box 7 " + "z" * 150}},
            {"tool": "echo", "args": {"message": "filler " * 20}},
            {"tool": "done", "args": {"summary": "noted where the capybara sleeps"}},
        ],
        "a.yaml",
    )
    assert run_cli("run", "--home", str(home), "--model", f"scripted:{first}").exit_code == 0
    second = write_script(tmp_path, [{"tool": "done", "args": {"summary": "second"}}], "b.yaml")
    assert run_cli("run", "--home", str(home), "--model", f"scripted:{second}").exit_code == 0
    assert "box 7" not in read_yaml(home / "scratchpad" / "active.yaml")["notes"]
    (home / "config.yaml").write_text("notes_budget: 4000\n")  # room for the recall note itself
    third = write_script(
        tmp_path,
        [
            {"tool": "recall", "args": {"query": "where does the capybara sleep?"}},
            {"tool": "done", "args": {"summary": "found it"}},
        ],
        "c.yaml",
    )
    assert run_cli("run", "--home", str(home), "--model", f"scripted:{third}").exit_code == 0
    notes = read_yaml(home / "scratchpad" / "active.yaml")["notes"]
    assert '[TOOL] recall({"query": "where does the capybara sleep?"}) -> 2 archived item(s)' in notes
    assert "box 7" in notes
