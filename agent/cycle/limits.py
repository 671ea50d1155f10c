"""Every limit of one cycle's own that ends it without `done`, checked in one place.

The loop asks `Limits.before_call()` before each model call and tells it each outcome with
`after_reply()`; either raises `LimitReached` with the stop reason. What reaches across cycles
(budgets per day and month, stalls) is a gate's (agent/gates/).
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable

from agent.common.outcomes import LimitReached, StopReason
from agent.config import Settings
from agent.models.base import ModelTimeout

# An A/B/A/B alternation over this many actions counts as repeating oneself.
ALTERNATION_SPAN = 4

SAME_ACTION_WARNING = (
    "WARNING: you sent the same action twice in a row. Its result is in the notes; do something else or call done."
)


def action_key(tool: str | None, args: Any) -> str | None:
    """A comparable form of one action (tool + args); None for replies that were not actions."""
    if tool is None:
        return None
    try:
        return tool + json.dumps(args, sort_keys=True)
    except (TypeError, ValueError):
        return None


class Limits:
    """Iterations, unparseable replies, tokens, time and repeats of one cycle."""

    def __init__(self, settings: Settings, clock: Callable[[], float] = time.monotonic):
        self.settings = settings
        self.clock = clock
        self.deadline = None if settings.time_budget is None else clock() + settings.time_budget
        self.calls = 0
        self.tokens = 0
        self.parse_errors_in_a_row = 0
        self.recent: list[str | None] = []

    def seconds_left(self) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - self.clock())

    def out_of_time(self) -> bool:
        return self.deadline is not None and self.clock() >= self.deadline

    def before_call(self) -> None:
        """Raise LimitReached if the cycle may not send another request to the model."""
        s = self.settings
        if self.parse_errors_in_a_row >= s.max_parse_errors:
            raise LimitReached(StopReason.PARSE_ERRORS, f"{self.parse_errors_in_a_row} unparseable replies in a row")
        if self.calls >= s.max_iterations:
            raise LimitReached(StopReason.MAX_ITERATIONS, f"reached the cap of {s.max_iterations} iterations")
        if s.token_budget is not None and self.tokens >= s.token_budget:
            raise LimitReached(StopReason.TOKEN_BUDGET, f"used {self.tokens} tokens of a budget of {s.token_budget}")
        if self.out_of_time():
            raise LimitReached(StopReason.TIME_BUDGET, f"ran past the time budget of {s.time_budget:g}s")
        self.calls += 1

    def timed(self, call: Callable[..., Any], *args: Any) -> Any:
        """Make a model call; one that ran out of the cycle's time is a time_budget stop, not a failure."""
        try:
            return call(*args)
        except ModelTimeout as exc:
            raise LimitReached(StopReason.TIME_BUDGET, str(exc)) from exc

    def count_tokens(self, total_tokens: int) -> None:
        self.tokens += total_tokens

    def after_reply(self, tool: str | None, args: Any, parse_error: bool) -> None:
        """Record one outcome; raise LimitReached when the model is going round in circles."""
        self.parse_errors_in_a_row = self.parse_errors_in_a_row + 1 if parse_error else 0
        self.recent.append(action_key(tool, args))
        n = self.settings.repeat_limit
        last = self.recent[-n:]
        if len(last) == n and last[0] is not None and len(set(last)) == 1:
            raise LimitReached(StopReason.REPEATED_ACTION, f"the same action was sent {n} times in a row")
        span = self.recent[-ALTERNATION_SPAN:]
        if (
            len(span) == ALTERNATION_SPAN
            and None not in span
            and span[0] != span[1]
            and span[0::2] == [span[0]] * (ALTERNATION_SPAN // 2)
            and span[1::2] == [span[1]] * (ALTERNATION_SPAN // 2)
        ):
            raise LimitReached(
                StopReason.REPEATED_ACTION,
                f"the model alternated between the same two actions {ALTERNATION_SPAN} times",
            )

    def warnings(self) -> list[str]:
        """What the next prompt should warn the model about."""
        if len(self.recent) >= 2 and self.recent[-1] is not None and self.recent[-1] == self.recent[-2]:
            return [SAME_ACTION_WARNING]
        return []
