"""The field-level summary of what changed between two states (agent/cli/diffing.py), for any two
states read back (read_state_file refuses non-text keys): hand-edited ones included, with fields
missing, of the wrong type, or not JSON."""

from __future__ import annotations

import datetime as dt

from agent.cli.diffing import summarize_change, summary_lines
from agent.state import fresh_state


def test_summarize_change_counts_repeats_and_reorders():
    old = {
        "current_task": "a",
        "pending_actions": ["x", "y", "x"],
        "completed_tasks": ["a0"],
        "goals": [],
        "notes": "l1\nl2",
        "last_updated": None,
    }
    new = dict(old, pending_actions=["y", "x", "x"], notes="l1\nl2b\nl3")
    summary = summarize_change(old, new)
    assert summary["pending"] == {"added": [], "removed": [], "reordered": True, "before": 3, "after": 3}
    assert summary["notes"] == {"lines_added": 2, "lines_removed": 1}
    assert summary["task"]["changed"] is False


def test_summarize_change_lists_repeated_additions_and_removals_once_per_copy():
    old = {"pending_actions": ["x", "x", "y"], "goals": ["g"]}
    new = {"pending_actions": ["x", "z", "z"], "goals": ["g", "g"]}
    summary = summarize_change(old, new)
    assert summary["pending"]["added"] == ["z", "z"] and summary["pending"]["removed"] == ["x", "y"]
    assert summary["goals"] == {"added": ["g"], "removed": []}


def test_diff_tells_archived_completed_tasks_from_hand_edits():
    old = {"completed_tasks": ["a", "b", "c"], "current_task": None}
    archived = summarize_change(old, {"completed_tasks": ["b", "c", "d"], "current_task": None})
    assert "-1 oldest moved to the archive" in summary_lines(archived)[1]
    edited = summarize_change(old, {"completed_tasks": ["a", "c"], "current_task": None})
    assert "edited by hand?" in summary_lines(edited)[1]


def test_summary_lines_name_other_changed_fields():
    summary = summarize_change({"owner": "me"}, {"owner": "you", "extra": 1})
    assert summary_lines(summary)[-1] == "other fields changed: extra, owner"


def test_an_unchanged_state_says_so_on_every_line():
    state = {**fresh_state(), "current_task": "a", "pending_actions": ["b"], "last_updated": "2026-01-01T00:00:00"}
    assert summary_lines(summarize_change(state, state)) == [
        "task: a (unchanged)",
        "completed: +0",
        "pending: unchanged (1 queued)",
        "notes: +0 line(s)",
        "last_updated: 2026-01-01T00:00:00 (unchanged)",
    ]


def test_a_cycle_that_did_its_task_reads_as_such():
    old = {**fresh_state(), "current_task": "a", "pending_actions": ["b", "c"], "notes": "n1"}
    new = {
        **old,
        "current_task": "b",
        "pending_actions": ["c"],
        "completed_tasks": [{"task": "a", "summary": "done it"}],
        "goals": ["g"],
        "notes": "n1\nn2",
        "last_updated": "2026-01-01T00:01:00",
    }
    assert summary_lines(summarize_change(old, new)) == [
        "task: a -> b",
        "completed: +1 (a: done it)",
        "pending: -1 (b); 2 -> 1 queued",
        "goals: +1, -0",
        "notes: +1 line(s)",
        "last_updated: never -> 2026-01-01T00:01:00",
    ]


def test_states_with_missing_fields_unhashable_items_and_odd_values_never_crash():
    odd = {
        "pending_actions": [{"nested": ["x"]}, {"nested": ["x"]}, dt.date(2026, 1, 1)],
        "completed_tasks": None,
        "notes": None,
        "current_task": {"not": "text"},
        "extra": {"any": "value"},
    }
    summary = summarize_change({}, odd)
    assert summary["pending"]["added"] == odd["pending_actions"] and summary["other_fields_changed"] == ["extra"]
    lines = summary_lines(summary)
    assert lines[0] == "task: (none) -> {'not': 'text'}" and lines[-1] == "other fields changed: extra"
    assert summarize_change(odd, {})["pending"]["removed"] == odd["pending_actions"]


def test_long_items_are_clipped_onto_one_line():
    old = {**fresh_state()}
    new = {**old, "pending_actions": ["a very long task\nspanning lines " + "x" * 100]}
    [pending] = [line for line in summary_lines(summarize_change(old, new)) if line.startswith("pending")]
    assert "\n" not in pending and "…" in pending and len(pending) < 100
