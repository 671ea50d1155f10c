"""logs/cycle_<id>.log: a timestamped trace of one cycle, for people.

Each call writes exactly one line: secrets are redacted and control characters (newlines
included) escaped, so text the model wrote can neither forge a line nor drive a terminal that
`cat`s the log. The log is bounded: past `max_bytes` one marker line is written and the rest
dropped. Nothing reads these lines back as data (history reads the records in logs/agent.db).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
from pathlib import Path

from agent.common.escape import escape_controls
from agent.common.files import disk_error
from agent.secrets import Secrets


class CycleLog:
    def __init__(self, path: Path, secrets: Secrets, max_bytes: int = 1 << 20):
        self.secrets = secrets
        self.room = max_bytes
        self.failed: OSError | None = None
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        except OSError as exc:  # read-only or full home: exit 7 with a clear message, not a traceback
            raise disk_error(path, exc) from exc
        self.handle = os.fdopen(fd, "a", encoding="utf-8", errors="backslashreplace", buffering=1)

    def __call__(self, message: str) -> None:
        self._write(escape_controls(self.secrets.redact_text(str(message))))

    def block(self, text: str) -> None:
        """Several lines (a traceback), each indented under a bar so none can pass for a log line."""
        for line in self.secrets.redact_text(str(text)).splitlines():
            self._write("  | " + escape_controls(line))

    def _write(self, line: str) -> None:
        # A log line that cannot be written (disk full) must not turn a cycle into a crash: the
        # state writes that follow report the disk problem (exit 7) on their own.
        if self.failed or self.room <= 0:
            return
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%H:%M:%S.%f")[:-3]
        text = f"{stamp} {line}\n"
        if len(text.encode("utf-8", "backslashreplace")) > self.room:
            text = f"{stamp} [log cut here: over its size limit; the transcript and index keep the rest]\n"
            self.room = 0
        else:
            self.room -= len(text.encode("utf-8", "backslashreplace"))
        try:
            self.handle.write(text)
        except OSError as exc:
            self.failed = exc

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.handle.flush()
            os.fsync(self.handle.fileno())
        with contextlib.suppress(OSError):
            self.handle.close()

    def __enter__(self) -> "CycleLog":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
