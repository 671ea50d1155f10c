"""Signals during a cycle: SIGTERM, SIGINT and SIGHUP end it like a failure, never half-saved.

While the cycle holds the lock a signal is only noted (`deferred`); inside the model loop it
raises `Interrupted` at once (`raising`), so a long model call or tool is cut short; and once the
loop is over the cycle's result is saved whole whatever arrives.
"""

from __future__ import annotations

import contextlib
import signal
from typing import Any, Callable, Iterator

from agent.common.outcomes import Interrupted

# SIGHUP is what an SSH session that drops sends: it must end the cycle like SIGTERM does.
HANDLED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def describe(signum: int) -> str:
    return f"interrupted by {signal.Signals(signum).name}"


@contextlib.contextmanager
def routed(handler: Callable[[int, Any], None]) -> Iterator[None]:
    """Route the handled signals to `handler` for the duration (main thread only)."""
    previous = {}
    try:
        for sig in HANDLED:
            previous[sig] = signal.signal(sig, handler)
    except ValueError:  # not the main thread: leave signals alone
        pass
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _raise(signum: int, _frame: Any) -> None:
    raise Interrupted(describe(signum))


def raising() -> contextlib.AbstractContextManager:
    """A signal raises Interrupted where the program is."""
    return routed(_raise)


class Deferred:
    """Notes a signal without acting on it (no logging: the main thread may be mid-write)."""

    def __init__(self) -> None:
        self.noted: str | None = None

    def __call__(self, signum: int, _frame: Any) -> None:
        self.noted = describe(signum)
