"""The openai client's own retries and timeouts, written to the cycle log while a request runs.

The client retries on its own (429, 5xx, timeouts) and says so only through Python logging at
DEBUG/INFO; without this a 127 s iteration made of three generations shows as one slow call.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Callable, Iterator

from agent.models.base import Log

CLIENT_LOGGER = "openai._base_client"
WORTH_LOGGING = (
    "Retrying request",
    "Encountered",
    "Raising timeout",
    "Raising connection",
    "Not retrying",
    "Retrying due to",
    "Retrying as header",
)


class _ToCycleLog(logging.Handler):
    def __init__(self, log: Log, redact: Callable[[str], str]):
        super().__init__(logging.DEBUG)
        self._log, self._redact = log, redact

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a client message that cannot be formatted is not worth a crash
            return
        if message.startswith(WORTH_LOGGING):
            self._log(f"openai client: {self._redact(message)}")


@contextlib.contextmanager
def client_messages_to(log: Log, redact: Callable[[str], str]) -> Iterator[None]:
    """While the block runs, the client's retry and timeout messages go to `log`, redacted."""
    logger = logging.getLogger(CLIENT_LOGGER)
    handler, level = _ToCycleLog(log, redact), logger.level
    logger.addHandler(handler)
    if logger.getEffectiveLevel() > logging.DEBUG:
        logger.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
