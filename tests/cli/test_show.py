"""`agent show`: the current state for a person to read, and with --all the archive too."""

from __future__ import annotations

from agent.store.archive import append_archive
from agent.store.home import Home
from tests.cli.helpers import ANSI, json_out
from tests.helpers import run_cli, write_active


def test_show_prints_every_field_for_a_person_without_colour_codes(worked_home):
    out = run_cli("show", "--home", str(worked_home)).stdout
    assert "current task: three" in out
    assert "goals (1):\n  1. ship it" in out
    assert "completed (2):\n  - one: did one\n  - two: did two" in out
    assert "[COMPLETED] did two" in out and "last updated: 20" in out
    assert ANSI not in out
    data = json_out(run_cli("show", "--home", str(worked_home), "--json"))
    assert data["state"]["current_task"] == "three" and "archived_completed_tasks" not in data


def test_show_all_adds_the_archive_and_tolerates_its_absence(worked_home):
    assert "archived completed (0" in run_cli("show", "--all", "--home", str(worked_home)).stdout
    append_archive(
        Home.at(worked_home),
        [
            {
                "cycle_id": "20200101_000000",
                "kind": "completed_task",
                "value": {"task": "old", "summary": "long ago"},
                "archived_at": "2020-01-01T00:00:00+00:00",
            },
            {
                "cycle_id": "20200101_000000",
                "kind": "note",
                "value": "an old note",
                "archived_at": "2020-01-01T00:00:00+00:00",
            },
        ],
    )
    out = run_cli("show", "--all", "--home", str(worked_home)).stdout
    assert "old: long ago  [cycle 20200101_000000]" in out and "an old note" in out
    data = json_out(run_cli("show", "--all", "--json", "--home", str(worked_home)))
    assert [r["value"]["task"] for r in data["archived_completed_tasks"]] == ["old"]


def test_show_lists_fields_outside_the_schema_by_name(home):
    write_active(home, {"current_task": "a", "owner": {"team": "ops"}})
    assert 'owner: {"team": "ops"}' in run_cli("show", "--home", str(home)).stdout


def test_show_refuses_an_invalid_scratchpad_with_exit_6(home):
    write_active(home, "goals: [unclosed")
    result = run_cli("show", "--home", str(home))
    assert result.exit_code == 6 and "active.yaml" in result.stderr


def test_show_all_puts_each_archive_under_its_heading_in_order(worked_home):
    append_archive(
        Home.at(worked_home),
        [
            {
                "cycle_id": "20200101_000000",
                "kind": "note",
                "value": "only note",
                "archived_at": "2020-01-01T00:00:00+00:00",
            }
        ],
    )
    out = run_cli("show", "--all", "--home", str(worked_home)).stdout
    assert "pending (0):\n  (none)\narchived completed (0):\n  (none)\ncompleted (2):\n" in out
    assert "  - two: did two\narchived notes (1 entry):\n  only note\nnotes (3 lines):\n" in out
    assert out.index("notes (3 lines):") < out.index("last updated:")
