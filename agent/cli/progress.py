"""What `agent run` prints while a cycle runs.

A reporter is called as reporter(event, **data) with the events "start", "notice" (a model says
what keeps the first call long: the embedded model's first run on a machine), "iteration" and
"end" (others are ignored), so the cycle does not know which one it talks to. On a terminal that is
the rich live display (agent/cli/live.py, imported only then, since rich is slow to load); in
cron mail, pipes and logs it is one plain line per event with no control codes.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, TextIO

import click

from agent.common.escape import escape_controls
from agent.common.outcomes import StopReason

Reporter = Callable[..., None]


class PlainReporter:
    """One plain line per event, no control codes: right for cron mail, pipes and logs."""

    def __init__(self, stream: TextIO, quiet: bool, quiet_resolved: bool = False):
        self.stream, self.quiet, self.quiet_resolved = stream, quiet, quiet_resolved

    def __call__(self, event: str, **data: Any) -> None:
        if self.quiet:
            if event == "end":
                self._quiet_end(data["report"])
            return
        if event == "start":
            task = data["task"] or "(none)"
            self._line(f"cycle {data['cycle_id']} started (model {data['model']}); task: {task}")
        elif event == "notice":
            self._line(f"  {data['text']}")
        elif event == "iteration":
            usage = data["usage"]
            tokens = f" [{usage.total_tokens} tokens]" if usage.total_tokens else ""
            self._line(f"  {data['n']}/{data['max']} {data['outcome'].note}{tokens}")
        elif event == "end":
            r = data["report"]
            self._line(
                f"cycle {r.cycle_id} {r.stop_reason} after {r.iterations} iteration(s) in {r.duration_s:.1f}s "
                f"(exit {r.exit_code}); task: {r.task_before or '(none)'} -> {r.task_after or '(none)'}"
            )
            if r.error:
                self._line(f"  error: {r.error} (see logs/cycle_{r.cycle_id}.log)")
            elif r.stop_detail:  # which limit, which budget, which call: what the stop reason alone does not say
                self._line(f"  stopped: {r.stop_detail}")
            if r.idle:  # no model was called (agent/cycle/idle.py)
                self._line(f"  {r.idle}")

    def _quiet_end(self, report: Any) -> None:
        """--quiet still reports what needs a person (cron mails it); a resolved incident only when opted in."""
        lines = [resolved_line(report) if self.quiet_resolved else None, quiet_line(report)]
        for line in lines:
            if line:
                click.echo(escape_controls(line), err=True)

    def close(self) -> None:
        """Nothing to stop: plain lines are written as they come."""

    def _line(self, text: str) -> None:
        # tasks, notes and errors hold text the model wrote: one line, no control sequence
        click.echo(escape_controls(" ".join(text.split("\n"))), file=self.stream)


def quiet_line(r: Any) -> str | None:
    """The one line `agent run --quiet` prints (on stderr, so cron mails it) for a cycle that needs
    a person: failed (4), awaiting approval (8), stalled (9), budget exhausted (10), once per incident
    (agent/after/incidents.py): the cycle that opens it. None otherwise (a held cycle is part of the
    incident it holds after)."""
    if r.incident is not None and not r.new_incident:
        return None  # told already: the incident's first cycle printed its line
    if r.error:
        return f"agent: cycle {r.cycle_id} failed: {r.error} (see logs/cycle_{r.cycle_id}.log)"
    if r.stop_reason == StopReason.AWAITING_APPROVAL.value:
        return f"agent: cycle {r.cycle_id} awaiting approval: {r.stop_detail} (exit 8; `agent approvals` lists them)"
    if r.stop_reason == StopReason.STALLED.value:
        return (
            f"agent: cycle {r.cycle_id} stalled: {_stalled_on(r.task_after)} has not advanced in stall_cycles cycles "
            f"(exit 9; `agent history` shows them, `agent task drop 0` moves on)"
        )
    if r.stop_reason == StopReason.BUDGET_EXHAUSTED.value:
        return (
            f"agent: budget exhausted, nothing sent to the model: {r.stop_detail} "
            f"(exit 10; `agent status` shows spending)"
        )
    if r.stop_reason == StopReason.HELD.value and r.held_for is not None:  # a hold whose incident was never told
        return f"agent: cycle {r.cycle_id} {r.idle} (exit {r.exit_code})"
    return None


def _stalled_on(task: Any) -> str:
    """What a stall is on: the task in single quotes as written, never a repr (its controls are
    escaped with the whole line where it is printed)."""
    if task is None:
        return "planning from the goals (no current task)"
    return f"task '{task}'"


def resolved_line(r: Any) -> str | None:
    """The line `--quiet` prints, with `quiet_resolved` on, for a cycle that resolved an incident."""
    if r.resolved is None:
        return None
    from agent.after.incidents import resolved_text

    return f"agent: cycle {r.cycle_id}: {resolved_text(r.resolved)}"


def make_reporter(
    as_json: bool, quiet: bool, max_iterations: int | None = None, quiet_resolved: bool = False
) -> Reporter:
    """Live progress for a person at a terminal; plain lines otherwise (on stderr under --json,
    so stdout holds only the JSON report). `max_iterations`: the cap, shown from the first step;
    `quiet_resolved`: --quiet prints a line for a resolved incident too."""
    if sys.stdout.isatty() and not (as_json or quiet):
        from agent.cli.live import LiveReporter  # rich: only for a terminal

        return LiveReporter(max_iterations=max_iterations)
    return PlainReporter(sys.stderr if as_json else sys.stdout, quiet, quiet_resolved)
