"""What `agent run` prints off a terminal (agent/cli/progress.py): one plain line per event, no
control codes, and under --quiet one line only for a cycle that needs a person."""

from __future__ import annotations

import io
import re

import pytest

from agent.after.report import CycleReport
from agent.cli.progress import PlainReporter, make_reporter, quiet_line
from agent.common.outcomes import StopReason
from agent.common.tags import Outcome, Tag
from agent.models.base import Usage
from tests.helpers import REPO

HOSTILE = "two\nlines \x1b[2J\u202e"


def _report(**fields) -> CycleReport:
    report = CycleReport("20261124_101500_01", "2026-11-24T10:15:00+00:00", "openai:m", task_after="fix the build")
    for key, value in fields.items():
        setattr(report, key, value)
    return report


def test_plain_lines_say_each_event_on_one_escaped_line():
    stream = io.StringIO()
    reporter = PlainReporter(stream, quiet=False)
    reporter("start", cycle_id="20261124_101500_01", model="openai:m", task=HOSTILE)
    reporter("iteration", n=1, max=3, outcome=Outcome(Tag.TOOL, f"[TOOL] {HOSTILE}", "echo"), usage=Usage(10, 2))
    reporter("iteration", n=2, max=3, outcome=Outcome(Tag.TOOL, "[TOOL] quiet", "echo"), usage=Usage())
    reporter("unknown_event", anything=1)
    reporter("end", report=_report(stop_reason="done", exit_code=0, iterations=2, error=HOSTILE, idle="idle: why"))
    reporter.close()
    lines = stream.getvalue().splitlines()
    assert lines[0] == "cycle 20261124_101500_01 started (model openai:m); task: two lines \\x1b[2J\\u202e"
    assert lines[1] == "  1/3 [TOOL] two lines \\x1b[2J\\u202e [12 tokens]"
    assert lines[2] == "  2/3 [TOOL] quiet"
    assert lines[3].startswith("cycle 20261124_101500_01 done after 2 iteration(s) in 0.0s (exit 0); task: (none)")
    assert lines[4] == "  error: two lines \\x1b[2J\\u202e (see logs/cycle_20261124_101500_01.log)"
    assert lines[5] == "  idle: why" and len(lines) == 6
    assert "\x1b" not in stream.getvalue()


def test_a_models_notice_is_one_escaped_line_before_its_first_reply_and_quiet_drops_it(capsys):
    stream = io.StringIO()
    reporter = PlainReporter(stream, quiet=False)
    reporter("start", cycle_id="20261124_101500_01", model="local", task="t")
    reporter("notice", text=f"preparing the model {HOSTILE}")
    assert stream.getvalue().splitlines()[1] == "  preparing the model two lines \\x1b[2J\\u202e"

    quiet = io.StringIO()
    PlainReporter(quiet, quiet=True)("notice", text="preparing the model")
    assert quiet.getvalue() == "" and capsys.readouterr().err == ""


def test_quiet_prints_only_the_end_of_a_cycle_that_needs_a_person(capsys):
    stream = io.StringIO()
    reporter = PlainReporter(stream, quiet=True)
    reporter("start", cycle_id="x", model="m", task="t")
    reporter("end", report=_report(stop_reason="done", exit_code=0))
    assert stream.getvalue() == "" and capsys.readouterr().err == ""
    reporter("end", report=_report(error=f"ValueError: {HOSTILE}"))
    err = capsys.readouterr().err
    assert err == (
        "agent: cycle 20261124_101500_01 failed: ValueError: two\\nlines \\x1b[2J\\u202e "
        "(see logs/cycle_20261124_101500_01.log)\n"
    )


@pytest.mark.parametrize(
    "task, shown",
    [
        ("fix the build", "task 'fix the build'"),
        ("don't break C:\\temp", "task 'don't break C:\\temp'"),
        (None, "planning from the goals (no current task)"),
    ],
)
def test_quiet_names_a_stalled_task_in_single_quotes_as_written(task, shown: str):
    line = quiet_line(_report(stop_reason="stalled", task_after=task))
    assert f"stalled: {shown} has not advanced in stall_cycles cycles" in line


def test_quiet_escapes_the_controls_of_a_stalled_task_on_its_one_line(capsys):
    PlainReporter(io.StringIO(), quiet=True)("end", report=_report(stop_reason="stalled", task_after=HOSTILE))
    [line] = capsys.readouterr().err.splitlines()
    assert "stalled: task 'two\\nlines \\x1b[2J\\u202e' has not advanced" in line


@pytest.mark.parametrize("reason", ["done", "max_iterations", "idle", "model_error"])
def test_quiet_says_nothing_of_a_cycle_that_needs_no_one(reason: str):
    assert quiet_line(_report(stop_reason=reason)) is None


def test_off_a_terminal_the_reporter_is_plain_on_stdout_or_on_stderr_under_json(capsys):
    plain = make_reporter(as_json=False, quiet=False)
    assert isinstance(plain, PlainReporter)
    under_json = make_reporter(as_json=True, quiet=False)
    under_json("start", cycle_id="c", model="m", task=None)
    captured = capsys.readouterr()
    assert captured.out == "" and "cycle c started (model m); task: (none)" in captured.err


def cron_mail_rows() -> dict[str, str | None]:
    """docs/operations.md's cron mail table: each stop reason it names -> the line documented (None: none)."""
    rows = {}
    for line in (REPO / "docs" / "operations.md").read_text().splitlines():
        match = re.match(r"\| (`[a-z_]+`(?:, `[a-z_]+`)*) \((\d+)(?: or \d+)?\) \| (.+) \|$", line)
        if match:
            mail = re.match(r"`+(.+?)`+(?:,|$)", match.group(3))
            for reason in re.findall(r"`([a-z_]+)`", match.group(1)):
                rows[reason] = mail.group(1) if mail else None
    return rows


DETAILS = {  # what a cycle with each stop reason that mails carries
    "awaiting_approval": {"stop_detail": "call 3 to shell awaits the operator (agent approve 3 / agent deny 3)"},
    "budget_exhausted": {
        "stop_detail": "the daily token budget is spent: 1,100 of 500 tokens used in UTC day 2026-11-24"
    },
    "error": {"error": "h:1 answered HTTP 503: busy (after 2 retries)"},
    "held": {"held_for": "stalled", "idle": "held: the task stalled"},
}


@pytest.mark.parametrize("reason", [r.value for r in StopReason])
def test_the_cron_mail_table_in_operations_md_shows_the_line_quiet_prints_for_each_stop_reason(reason: str):
    """Stop reason by stop reason, the line the table names is the one --quiet prints for the cycle
    that opens an incident, and a cycle that is part of one told already prints nothing."""
    rows = cron_mail_rows()
    assert reason in rows, f"docs/operations.md's cron mail table has no row for {reason}"
    code = StopReason(reason).exit_code if reason != "held" else 9
    report = _report(stop_reason=reason, exit_code=int(code), incident="0123456789abcdef", new_incident=True)
    for key, value in DETAILS.get(reason, {}).items():
        setattr(report, key, value)
    if reason == "held":  # a held cycle is part of the incident it holds after: never the first
        report.new_incident = False
    printed, documented = quiet_line(report), rows[reason]
    if documented is None:
        assert printed is None, (reason, printed)
    else:
        documented = documented.replace("<id>", report.cycle_id).replace("<n>", "3").replace("<tool>", "shell")
        documented = documented.replace("<task>", "fix the build").replace(
            "<error>", "h:1 answered HTTP 503: busy (after 2 retries)"
        )
        assert printed is not None and printed.startswith(documented.removesuffix("...)")), (reason, printed)
    report.new_incident = False
    assert quiet_line(report) is None  # the next cycles of the incident mail nothing
