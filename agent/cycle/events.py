"""One event per action the loop takes; whatever wants to know subscribes.

The loop emits a `Step` (the iteration and the Outcome) and knows nothing of who listens: the
cycle subscribes the log line, the report's counts (`actions`) and the progress display
(`agent run`'s live lines), in that order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from agent.common.tags import Outcome


@dataclass(frozen=True)
class Step:
    """One action of the loop: in which iteration, and what it did."""

    n: int
    outcome: Outcome
    call_id: str | None = None  # a native tool call's id, as the endpoint gave it
    began_ns: int = 0  # wall clock, when the dispatcher took the action and when it was done (traces)
    ended_ns: int = 0


class Events:
    """The loop's one sink: `emit` hands each Step to every subscriber, in the order they subscribed."""

    def __init__(self) -> None:
        self.subscribers: list[Callable[[Step], None]] = []

    def subscribe(self, subscriber: Callable[[Step], None]) -> None:
        self.subscribers.append(subscriber)

    def emit(self, step: Step) -> None:
        for subscriber in self.subscribers:
            subscriber(step)
