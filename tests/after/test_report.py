"""A cycle's report: counts, the end, a failure's note, the index record, and output that never fails a cycle."""

from __future__ import annotations

from agent.after.report import CycleReport, SafeReporter
from agent.common.outcomes import StopReason
from agent.common.tags import Tag
from agent.secrets import Secrets


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
    assert report.error == "RuntimeError: boom [REDACTED]" and report.exit_code == 4
    assert Tag.of(note)[0] is Tag.CYCLE_FAILED and "logs/cycle_20260101_000000_01.log" in note


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
