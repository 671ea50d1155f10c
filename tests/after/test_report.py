"""A cycle's report: counts, the end, a failure's note, the index record, and output that never fails a cycle."""

from __future__ import annotations

import pytest

from agent.after.report import CycleReport, SafeReporter
from agent.common.outcomes import Interrupted, StopReason
from agent.common.tags import Tag
from agent.models.base import ModelCrashed, ModelUnavailable, ScriptEnded
from agent.secrets import Secrets
from agent.state import InvariantViolation


def _report() -> CycleReport:
    return CycleReport("20260101_000000_01", "2026-01-01T00:00:00+00:00", "scripted:x")


def test_a_report_starts_as_a_failure_and_ends_with_the_reasons_exit_code():
    report = _report()
    assert (report.stop_reason, report.exit_code) == ("error", 4)
    report.end(StopReason.STALLED)
    assert (report.stop_reason, report.exit_code) == ("stalled", 9)


def test_actions_are_counted_by_the_tags_action_name():
    report = _report()
    for tag in (Tag.TOOL, Tag.TOOL, Tag.COMPLETED):
        report.count(tag.action)
    assert report.actions == {"tool": 2, "done": 1}


def test_a_failure_is_redacted_and_noted():
    report = _report()
    secrets = Secrets({"sk-secret-value-123456"})
    note = report.fail(RuntimeError("boom sk-secret-value-123456"), secrets)
    assert report.error == "a bug in the runner: RuntimeError: boom [REDACTED] (its traceback is in the log)"
    assert report.exit_code == 4 and report.error_kind == "bug" and report.error_endpoint is None
    assert Tag.of(note)[0] is Tag.CYCLE_FAILED and "logs/cycle_20260101_000000_01.log" in note
    assert "sk-secret" not in note


@pytest.mark.parametrize(
    "exc, kind, text",
    [
        (Interrupted("interrupted by SIGTERM"), "interrupted", "interrupted by SIGTERM"),
        (KeyboardInterrupt(), "interrupted", "interrupted by SIGINT"),
        (InvariantViolation("notes is not text"), "invariant", "breaks a rule, so it was not saved: notes is not text"),
        (ModelCrashed("the embedded model's process (pid 7) was killed by SIGSEGV"), "crashed", "pid 7"),
        (ModelUnavailable("h:1 refused the connection", kind="refused", endpoint="h:1"), "refused", "h:1 refused"),
        (ScriptEnded("the script has only 0 replies"), "unavailable", "the script has only 0 replies"),
    ],
)
def test_a_failure_is_classified_where_it_is_raised_and_says_what_happened_without_a_class_name(exc, kind, text):
    report = _report()
    report.fail(exc, Secrets(set()))
    assert report.error_kind == kind and text in report.error
    assert type(exc).__name__ not in report.error


def test_the_index_record_is_the_report_without_its_file_list():
    report = _report()
    report.files.append("scratchpad/x.yaml")
    record = report.index_record()
    assert "files" not in record and record["cycle_id"] == "20260101_000000_01"
    assert set(record) | {"files", "stop_detail"} == set(report.as_dict())  # what the limit said: run --json only


def test_a_reporter_whose_output_fails_is_dropped_not_raised():
    calls = []

    def broken(event, **data):
        calls.append(event)
        raise BrokenPipeError

    reporter = SafeReporter(broken)
    reporter("start")
    reporter("iteration")
    assert calls == ["start"]
    SafeReporter(None)("anything")
