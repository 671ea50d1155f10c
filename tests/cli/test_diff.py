"""`agent diff` over real homes (the field-level summary behind it: tests/cli/test_diffing.py)."""

from __future__ import annotations

from agent.cli import snapshots
from agent.store.home import Home
from tests.cli.helpers import ANSI, cycle_ids, json_out
from tests.helpers import run_cli, tree_digest


def test_diff_defaults_to_the_latest_cycle_with_a_summary_then_a_plain_unified_diff(worked_home):
    result = run_cli("diff", "--home", str(worked_home))
    assert result.exit_code == 0
    out = result.stdout
    assert "task: two -> three" in out
    assert "completed: +1 (two: did two)" in out
    assert "pending: -1 (three); 1 -> 0 queued" in out
    assert "notes: +1 line(s)" in out
    latest = cycle_ids(worked_home)[-1]
    assert f"--- scratchpad/{latest}_before.yaml" in out and f"+++ scratchpad/{latest}_after.yaml" in out
    assert "+- task: two" in out
    assert ANSI not in out  # not a terminal: no colour codes


def test_diff_of_two_cycles_spans_from_the_first_before_to_the_second_after_as_json(worked_home):
    first, second = cycle_ids(worked_home)
    data = json_out(run_cli("diff", "--home", str(worked_home), first, second, "--json"))
    assert data["from"] == f"scratchpad/{first}_before.yaml" and data["to"] == f"scratchpad/{second}_after.yaml"
    summary = data["summary"]
    assert summary["task"] == {"before": "one", "after": "three", "changed": True}
    assert [t["task"] for t in summary["completed"]["added"]] == ["one", "two"]
    assert summary["pending"]["removed"] == ["two", "three"]
    assert summary["notes"]["lines_added"] == 3  # [TOOL], [COMPLETED], [COMPLETED]
    assert "+- task: one" in data["diff"]


def test_diff_a_cycle_against_active_shows_edits_made_since(worked_home):
    assert run_cli("task", "add", "four", "--home", str(worked_home)).exit_code == 0
    latest = cycle_ids(worked_home)[-1]
    data = json_out(run_cli("diff", "--home", str(worked_home), f"{latest}:after", "active", "--json"))
    assert data["to"] == "scratchpad/active.yaml"
    assert data["summary"]["pending"]["added"] == ["four"]
    assert data["summary"]["task"]["changed"] is False


def test_diff_active_alone_compares_the_latest_after_with_active(worked_home):
    assert run_cli("goal", "add", "be kind", "--home", str(worked_home)).exit_code == 0
    result = run_cli("diff", "active", "--home", str(worked_home))
    assert result.exit_code == 0
    assert "goals: +1, -0" in result.stdout
    assert "+- be kind" in result.stdout


def test_diff_colours_only_when_asked_or_on_a_terminal(worked_home):
    plain = run_cli("diff", "--home", str(worked_home)).stdout
    coloured = run_cli("diff", "--home", str(worked_home), "--color").stdout
    assert ANSI not in plain
    assert "\x1b[32m+" in coloured and "\x1b[31m-" in coloured


def test_diff_of_an_unknown_cycle_or_label_exits_2_naming_it_and_changes_nothing(worked_home):
    before = tree_digest(worked_home)
    result = run_cli("diff", "--home", str(worked_home), "20990101_000000")
    assert result.exit_code == 2
    assert "no cycle '20990101_000000'" in result.stderr and "agent history" in result.stderr
    bad_label = run_cli("diff", "--home", str(worked_home), f"{cycle_ids(worked_home)[0]}:middle")
    assert bad_label.exit_code == 2 and "before or after" in bad_label.stderr
    assert tree_digest(worked_home) == before


def test_diff_in_a_home_with_no_cycles_exits_2_saying_there_are_none(home):
    result = run_cli("diff", "--home", str(home))
    assert result.exit_code == 2 and "no cycles" in result.stderr


def test_diff_of_a_pruned_cycle_exits_2_saying_its_snapshot_was_pruned(worked_home):
    first = cycle_ids(worked_home)[0]
    assert run_cli("prune", "--keep", "1", "--home", str(worked_home)).exit_code == 0
    result = run_cli("diff", first, "--home", str(worked_home))
    assert result.exit_code == 2 and "pruned" in result.stderr


def test_the_latest_saved_cycle_is_found_reading_the_cycles_only_as_far_as_needed(worked_home, monkeypatch):
    """`agent diff` at any history: the newest cycle with a snapshot pair, the cycles with files read
    newest first, lazily, never all of them."""
    ids = cycle_ids(worked_home)
    h = Home.at(worked_home)

    def with_files_newest_first(home):
        yield ids[0]
        raise AssertionError("read the cycles past the one it needed")

    monkeypatch.setattr(snapshots, "with_files_newest_first", with_files_newest_first)
    assert snapshots.latest_saved(h, ids) == ids[-1]
    for label in ("before", "after"):  # the newest cycle left no pair (an idle cycle writes none)
        h.snapshot(ids[-1], label).unlink()
    assert snapshots.latest_saved(h, ids[-1:]) == ids[0]
