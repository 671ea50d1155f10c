"""Failures never evict memory: repeated failure notes of one kind fold into one counted line,
rewritten in place, so an outage of any length costs the notes one line (agent/after/failures.py)."""

from __future__ import annotations

import json

import pytest

from agent.after.report import failure_kind
from agent.common.outcomes import FailureKind, Interrupted
from agent.common.tags import Tag
from agent.config import load_settings
from agent.cycle.run import run_cycle
from agent.models.base import ModelError, ModelTimeout, ModelUnavailable, ScriptEnded
from agent.models.scripted import ScriptedModel
from agent.state import InvariantViolation
from agent.store.home import Home
from tests.cli.helpers import done
from tests.cli.helpers import run_cycle as run_scripted
from tests.helpers import cycle_records, read_active, transcript, write_active

KNOWN = "Known: the staging database is db2, never db1"
STATE = {
    "goals": [],
    "current_task": "Migrate the table",
    "pending_actions": [],
    "completed_tasks": [],
    "notes": KNOWN,
    "last_updated": None,
}


class Unreachable:
    """A model whose endpoint refuses every request (the kind its client would give it)."""

    name = "unreachable"

    def start(self, log) -> None:
        pass

    def complete(self, request):
        raise ModelUnavailable("connection refused", kind=FailureKind.REFUSED.value)


def fail_with(home, model) -> dict:
    report = run_cycle(Home.at(home), load_settings(home), model)
    assert report.exit_code == 4
    return report.as_dict()


def failure_lines(home) -> list[str]:
    return [line for line in read_active(home)["notes"].split("\n") if line.startswith(Tag.CYCLE_FAILED.value)]


def test_thirty_failed_cycles_in_a_row_leave_a_note_written_before_them_in_the_prompt(home):
    (home / "config.yaml").write_text("notes_budget: 400\n")
    write_active(home, STATE)
    for _ in range(30):
        assert run_scripted(home, []).exit_code == 4  # the model is never reached
    assert run_scripted(home, [done("migrated")]).exit_code == 0
    shown = json.dumps(transcript(home, cycle_records(home)[-1]["cycle_id"]), ensure_ascii=False)
    assert KNOWN in shown  # what the model read when it came back
    assert "×30 since " in shown


def test_an_outage_costs_the_notes_one_counted_line(home):
    write_active(home, STATE)
    for _ in range(5):
        fail_with(home, Unreachable())
    notes = read_active(home)["notes"].split("\n")
    assert notes[0] == KNOWN and len(notes) == 2
    first, last = cycle_records(home)[0], cycle_records(home)[-1]
    assert notes[1].startswith(f"{Tag.CYCLE_FAILED.value} ×5 since ")
    assert notes[1].endswith(
        f", refused: cycle {last['cycle_id']}: connection refused (see logs/cycle_{last['cycle_id']}.log)"
    )
    assert last["failure_streak"]["count"] == 5 and last["failure_streak"]["since"] == first["started"]
    assert last["error_kind"] == "refused"


def test_the_first_failure_is_the_note_it_always_was(home):
    write_active(home, STATE)
    record = fail_with(home, Unreachable())
    assert failure_lines(home) == [
        f"{Tag.CYCLE_FAILED.value} cycle {record['cycle_id']}: connection refused "
        f"(see logs/cycle_{record['cycle_id']}.log)"
    ]


def test_a_failure_of_another_kind_starts_its_own_line(home):
    write_active(home, STATE)
    fail_with(home, Unreachable())
    fail_with(home, Unreachable())
    fail_with(home, ScriptedModel.from_replies([]))  # a different kind: unavailable
    lines = failure_lines(home)
    assert len(lines) == 2 and "×2 since" in lines[0] and "the script has only" in lines[1] and "×" not in lines[1]


def test_a_cycle_that_works_ends_the_streak(home):
    write_active(home, STATE)
    fail_with(home, Unreachable())
    run_cycle(
        Home.at(home),
        load_settings(home),
        ScriptedModel.from_replies([{"tool": "echo", "args": {"message": "hi"}}] * 20),
    )
    fail_with(home, Unreachable())
    assert not any("×" in line for line in failure_lines(home))


def test_a_failure_line_the_model_rewrote_is_left_alone_and_the_count_goes_on(home):
    write_active(home, STATE)
    fail_with(home, Unreachable())
    state = read_active(home)
    state["notes"] = state["notes"].replace("connection refused", "connection REFUSED")  # edited since
    write_active(home, state)
    fail_with(home, Unreachable())
    lines = failure_lines(home)
    assert "connection REFUSED" in lines[0] and "×2 since" in lines[1]


@pytest.mark.parametrize(
    "exc, kind",
    [
        (ModelUnavailable("x", kind="http_401"), "http_401"),
        (ModelTimeout("x"), "timeout"),
        (ModelUnavailable("x"), "unavailable"),
        (ScriptEnded("x"), "unavailable"),
        (ModelError("x"), "bad_response"),
        (KeyboardInterrupt(), "interrupted"),
        (Interrupted("SIGTERM"), "interrupted"),
        (InvariantViolation("x"), "invariant"),
        (ValueError("x"), "bug"),
    ],
)
def test_a_failure_s_kind_is_its_own_when_set_else_its_class_s(exc, kind):
    assert failure_kind(exc) == kind


def test_an_outage_archives_no_note_as_replaced_by_the_model(home):
    from agent.store.archive import archived

    write_active(home, STATE)
    for _ in range(5):
        fail_with(home, Unreachable())
    reasons = [r["reason"] for r in archived(Home.at(home)) if r["kind"] == "note"]
    assert "replaced by the model" not in reasons, reasons
