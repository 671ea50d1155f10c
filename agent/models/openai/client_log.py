"""The openai client's own retries, written to the cycle log while a request runs.

The client retries on its own (429, 5xx, timeouts, lost connections); without this a 127 s
iteration made of three generations shows as one slow call. The client's HTTP client calls
`Attempts`' event hooks for every attempt it sends, and the client numbers each attempt itself
(the `x-stainless-retry-count` header it sends with it): a retry, with how long the attempt before
it took and how that one ended (an error status, or no reply at all), is counted from the attempts,
never read back from the client's log text. Only numbers are written: nothing a server said.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Iterator

from agent.models.base import Log

RETRY_HEADER = "x-stainless-retry-count"  # the client's own count of the retries before this attempt


class Attempts:
    """The event hooks of one model's HTTP client (`hooks`), logging each retry of a request to the
    log `during` gives for it."""

    def __init__(self) -> None:
        self.log: Log = lambda _line: None
        self.retries = 0  # of the request running
        self.started = 0.0  # when its last attempt was sent
        self.status: int | None = None  # its last attempt's reply; None: none came

    def hooks(self) -> dict[str, list]:
        return {"request": [self.sent], "response": [self.answered]}

    @contextlib.contextmanager
    def during(self, log: Log) -> Iterator[None]:
        """While the block runs (one request, its retries included), each retry goes to `log`."""
        self.log, self.retries, self.status = log, 0, None
        try:
            yield
        finally:
            self.log = lambda _line: None

    def sent(self, request: Any) -> None:
        retry = _count(request.headers.get(RETRY_HEADER))
        if retry > self.retries:  # a redirect repeats the count: only a new attempt is a retry
            ended = (
                "no reply (refused, timed out or the connection was lost)"
                if self.status is None
                else f"HTTP {self.status}"
            )
            self.log(f"openai client: retry {retry}: the attempt before it ended after {self._took()} with {ended}")
            self.retries = retry
        self.started, self.status = time.monotonic(), None

    def answered(self, response: Any) -> None:
        self.status = response.status_code

    def _took(self) -> str:
        return f"{time.monotonic() - self.started:.2f}s"


def _count(value: Any) -> int:
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0
