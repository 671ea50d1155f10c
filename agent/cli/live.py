"""Live progress for `agent run` on a terminal, drawn with rich.

`LiveReporter` has PlainReporter's interface (agent/cli/progress.py), which imports this module
only when stdout is a terminal: cron mail and pipes keep the plain lines with no control codes.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

from agent.cli.guard import raw
from agent.common.escape import escape_controls

# The style of each dispatcher outcome kind (agent.common.tags.Tag's `action` names).
KIND_STYLES = {
    "tool": "cyan",
    "update": "blue",
    "done": "bold green",
    "parse_error": "yellow",
    "unknown_tool": "yellow",
    "tool_error": "red",
    "check_failed": "red",
}
STOP_STYLES = {"done": "bold green", "error": "bold red"}  # any other stop reason: a limit


class LiveReporter:
    """A spinner line (iteration, tokens, elapsed) under one printed line per model action."""

    def __init__(self, console: Console | None = None, max_iterations: int | None = None):
        self.console = console or Console(file=raw(sys.stdout))  # rich draws with escapes; it escapes model text
        self.live: Live | None = None
        self.started = time.monotonic()
        self.iteration, self.max_iterations, self.tokens = 0, max_iterations, 0  # `1/10` from the first step
        self.last_tool: str | None = None
        self.notice: str | None = None  # what the model is doing before its first reply

    def __call__(self, event: str, **data: Any) -> None:
        handler = getattr(self, f"_on_{event}", None)
        if handler is not None:
            handler(**data)

    # ------------------------------------------------------------------------------- events

    def _on_start(self, cycle_id: str, model: str, task: str | None, **_: Any) -> None:
        # Only Text objects are printed (rich reads no [markup] in them), and every string the
        # model could have written is escaped first: rich passes escape sequences through.
        model, task = escape_controls(model), task and escape_controls(task)
        self.started = time.monotonic()
        self.console.print(Text.assemble(("cycle ", "bold"), (cycle_id, "bold magenta"), f"  model {model}"))
        self.console.print(Text.assemble("  task: ", (task or "(none)", "bold")), overflow="ellipsis", no_wrap=True)
        self.live = Live(console=self.console, transient=True, refresh_per_second=8, get_renderable=self._ticking)
        self.live.start()

    def _on_notice(self, text: str, **_: Any) -> None:
        self.notice = escape_controls(text)
        self.console.print(Text("  " + self.notice, style="dim"), overflow="ellipsis", no_wrap=True)
        if self.live is not None:
            self.live.update(self._status())

    def _on_iteration(self, n: int, max: int, outcome: Any, usage: Any, **_: Any) -> None:  # noqa: A002
        self.iteration, self.max_iterations, self.notice = n, max, None
        self.tokens = getattr(usage, "total_tokens", 0) or 0
        kind = getattr(getattr(outcome, "kind", None), "action", "tool")
        tool = getattr(outcome, "tool", None)
        self.last_tool = None if tool is None else escape_controls(tool)
        line = Text.assemble(f"  {n:>2}/{max} ", (escape_controls(outcome.note), KIND_STYLES.get(kind, "")))
        if self.tokens:
            line.append(f"  [{self.tokens:,} tokens]", style="dim")
        self.console.print(line, overflow="ellipsis", no_wrap=True)
        if self.live is not None:
            self.live.update(self._status())

    def _on_end(self, report: Any, **_: Any) -> None:
        self.close()
        style = STOP_STYLES.get(report.stop_reason, "bold yellow")
        tokens = report.usage.total_tokens
        self.console.print(
            Text.assemble(
                (f"{report.stop_reason}", style),
                f" after {report.iterations} iteration(s) in {report.duration_s:.1f}s",
                f", {tokens:,} tokens" if tokens else "",
                f" (exit {report.exit_code}); task: ",
                (escape_controls(report.task_before or "(none)"), "bold"),
                " -> ",
                (escape_controls(report.task_after or "(none)"), "bold"),
            )
        )
        if report.idle:  # no model was called (agent/cycle/idle.py)
            self.console.print(Text("  " + escape_controls(report.idle), style="dim"))
        if report.stop_detail and not report.error:  # which limit, which budget, which call
            self.console.print(Text.assemble(("  stopped: ", style), escape_controls(report.stop_detail)))
        if report.error:
            self.console.print(
                Text.assemble(
                    ("  error: ", "bold red"), escape_controls(report.error), f" (see logs/cycle_{report.cycle_id}.log)"
                )
            )

    # ------------------------------------------------------------------------------ drawing

    def _status(self) -> Group:
        of = f"/{self.max_iterations}" if self.max_iterations else ""
        parts = [
            f"iteration {self.iteration + 1}{of}"
            if self.max_iterations is None or self.iteration < self.max_iterations
            else f"iteration {self.iteration}{of}",
            f"{self.tokens:,} tokens",
            f"{time.monotonic() - self.started:.1f}s",
        ]
        if self.last_tool:
            parts.append(f"last tool {self.last_tool}")
        if self.notice:
            parts.append("preparing the model")
        return Group(Spinner("dots", text=Text("  " + " · ".join(parts), style="dim")))

    def _ticking(self) -> Group:
        """The status line as it is now. rich asks for it at every refresh (8 a second), so the clock
        runs while a model call blocks the cycle and no event comes; each one's spinner is dated
        from the cycle's start, so it turns instead of showing its first frame for ever."""
        status = self._status()
        for part in status.renderables:
            if isinstance(part, Spinner):
                part.start_time = self.started  # rich's clock is time.monotonic, as ours
        return status

    def close(self) -> None:
        """Stop the live display (idempotent); called on end and when the cycle raises."""
        if self.live is not None:
            self.live.stop()
            self.live = None
