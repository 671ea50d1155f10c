"""Live progress on a terminal (agent/cli/live.py), drawn by rich into a buffer that says it is a
terminal: every string a model could have written escaped, rich markup printed, never parsed."""

from __future__ import annotations

import io
import re

from rich.console import Console

from agent.after.report import CycleReport
from agent.cli.live import LiveReporter
from agent.common.tags import Outcome, Tag
from agent.config import Settings
from agent.cycle import run as cycle
from agent.models.base import Usage
from agent.models.scripted import ScriptedModel
from agent.store.home import Home
from tests.cli.helpers import ANSI, done, echo
from tests.helpers import wait_for, write_script


def _reporter() -> tuple[LiveReporter, io.StringIO]:
    buffer = io.StringIO()
    return LiveReporter(Console(file=buffer, force_terminal=True, width=120)), buffer


def test_live_reporter_draws_iterations_tools_and_tokens():
    reporter, buffer = _reporter()
    reporter("start", cycle_id="20260101_000000", model="openai:m", task="count [sheep]")
    reporter(
        "iteration",
        n=1,
        max=5,
        outcome=Outcome(Tag.TOOL, "[TOOL] echo({'message': 'hi'}) -> hi", "echo"),
        usage=Usage(prompt_tokens=1200, completion_tokens=34),
    )
    reporter("something_new", detail="ignored")
    report = CycleReport(
        "20260101_000000",
        "2026-01-01T00:00:00+00:00",
        "openai:m",
        stop_reason="done",
        exit_code=0,
        iterations=1,
        task_before="count [sheep]",
        task_after=None,
        usage=Usage(prompt_tokens=1200, completion_tokens=34),
    )
    reporter("end", report=report)
    out = buffer.getvalue()
    assert ANSI in out
    assert "[TOOL] echo({'message': 'hi'}) -> hi" in out  # rich markup in notes is printed, not parsed
    assert "1/5" in out and "1,234 tokens" in out and "count [sheep]" in out
    assert "done" in out and "(exit 0)" in out
    assert reporter.live is None


def test_live_reporter_follows_a_real_cycle(home):
    reporter, buffer = _reporter()
    script = write_script(home.parent, [echo("hi"), {"tool": "nope", "args": {}}, done("ok")])
    report = cycle.run_cycle(Home.at(home), Settings(idle="run"), ScriptedModel(script), reporter)
    out = buffer.getvalue()
    assert report.exit_code == 0
    for text in (report.cycle_id, "[TOOL] echo", "[UNKNOWN TOOL]", "[COMPLETED] ok", "after 3 iteration(s)"):
        assert text in out


def test_a_models_notice_is_shown_until_its_first_reply():
    reporter, buffer = _reporter()
    reporter("start", cycle_id="20260101_000000_01", model="local", task="t")
    reporter("notice", text="preparing the model (first run on this machine)\x1b[2J")
    assert "preparing the model" in str(reporter._status().renderables[0].text)
    reporter("iteration", n=1, max=5, outcome=Outcome(Tag.TOOL, "[TOOL] echo", "echo"), usage=Usage())
    assert "preparing the model" not in str(reporter._status().renderables[0].text)
    reporter.close()
    out = buffer.getvalue()
    assert "preparing the model (first run on this machine)\\x1b[2J" in out and "\x1b[2J" not in out


def test_what_the_model_wrote_cannot_drive_the_terminal():
    reporter, buffer = _reporter()
    hostile = "\x1b]0;owned\x07\x1b[2J\u202e"
    reporter("start", cycle_id="20260101_000000_01", model=f"openai:{hostile}", task=f"task {hostile}")
    reporter("iteration", n=1, max=2, outcome=Outcome(Tag.TOOL, f"[TOOL] {hostile}", f"tool{hostile}"), usage=Usage())
    report = CycleReport("20260101_000000_01", "2026-01-01T00:00:00+00:00", "m", iterations=1)
    report.task_before, report.task_after = hostile, hostile
    report.error, report.idle = f"ValueError: {hostile}", f"idle {hostile}"
    reporter("end", report=report)
    out = buffer.getvalue()
    assert "\x1b]0;" not in out and "\x07" not in out and "\x1b[2J" not in out and "\u202e" not in out
    assert "\\x1b]0;owned\\x07" in out
    assert "error: " in out and "(see logs/cycle_20260101_000000_01.log)" in out and "idle " in out


def test_close_is_idempotent_and_an_end_without_a_start_draws_the_summary():
    reporter, buffer = _reporter()
    reporter.close()
    report = CycleReport("20260101_000000_01", "2026-01-01T00:00:00+00:00", "m", stop_reason="max_iterations")
    reporter("end", report=report)
    reporter.close()
    out = buffer.getvalue()
    assert "\x1b[1;33mmax_iterations\x1b[0m after 0 iteration(s)" in out  # a limit: bold yellow
    assert reporter.live is None


def _seconds_shown(text: str) -> list[float]:
    return [float(s) for s in re.findall(r"· (\d+\.\d)s", text)]


def test_the_clock_runs_while_a_model_call_blocks_and_no_event_comes():
    """Between events (a model call may take a minute) the status line is redrawn with the time
    as it is, not as it was at the last event."""
    reporter, buffer = _reporter()
    reporter("start", cycle_id="20260101_000000", model="openai:m", task="wait")
    try:
        wait_for(lambda: any(s >= 0.5 for s in _seconds_shown(buffer.getvalue())), "the clock to pass 0.5s", 20)
    finally:
        reporter.close()
    shown = _seconds_shown(buffer.getvalue())
    assert shown == sorted(shown) and len(set(shown)) >= 3  # it ticked, and never went back


def test_the_spinner_turns_between_events():
    reporter, buffer = _reporter()
    reporter("start", cycle_id="20260101_000000", model="openai:m", task="wait")
    frames = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"  # rich's "dots"
    try:
        wait_for(lambda: sum(f in buffer.getvalue() for f in frames) >= 3, "three frames of the spinner", 20)
    finally:
        reporter.close()


def test_the_iteration_cap_is_shown_from_the_first_step():
    buffer = io.StringIO()
    reporter = LiveReporter(Console(file=buffer, force_terminal=True, width=120), max_iterations=10)
    reporter("start", cycle_id="20260101_000000", model="openai:m", task="wait")
    try:
        wait_for(lambda: "iteration 1/10" in buffer.getvalue(), "the first step's status line", 20)
    finally:
        reporter.close()
    assert "iteration 1 " not in buffer.getvalue() and "iteration 1 ·" not in buffer.getvalue()


def test_a_limit_is_named_under_the_last_line():
    reporter, buffer = _reporter()
    report = CycleReport("20260101_000000_01", "2026-01-01T00:00:00+00:00", "m", stop_reason="budget_exhausted")
    report.exit_code, report.stop_detail = 10, "the daily token budget is spent: 1,100 of 500 tokens \x1b[2J"
    reporter("end", report=report)
    out = re.sub(r"\x1b\[[0-9;]*m", "", buffer.getvalue())
    assert "budget_exhausted after 0 iteration(s)" in out
    assert "  stopped: the daily token budget is spent: 1,100 of 500 tokens \\x1b[2J" in out
