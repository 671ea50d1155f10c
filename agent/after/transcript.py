"""logs/cycle_<id>.transcript.jsonl: every model request of a cycle and its reply, exactly.

The cycle log says "iteration 1: prompt 4429 bytes"; the transcript keeps the chat messages the
provider really sent and the reply text it received, one JSON line per request (the reflect call
too), so a bad cycle can be read back and replayed. Secrets are redacted before a line is written,
and a transcript is bounded: past `transcript_max_bytes` one `cut` line is written and later
requests are left out. A transcript that cannot be written (disk full) never fails the cycle; the
state writes that follow report the disk.

A line: {"call", "purpose", "messages", "reply", "finish_reason", "usage", "elapsed_s"} or, when
the request failed, "error" in place of the reply. A native request adds "tools" (the function
definitions sent) and, when the reply made calls, "tool_calls" (each with its arguments string
exactly as received). Retention deletes it with its cycle's log.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any, Iterator

from agent.models.base import Completion, Log, Model, Request
from agent.secrets import Secrets
from agent.store.files import SECRET_FILE_MODE

# Room kept for the one line that says the transcript was cut.
CUT_LINE_ROOM = 200


def sent_messages(request: Request, completion: Completion | None) -> list[dict]:
    """The messages a request sent: the provider's own list when it gives one, else system + user."""
    if completion is not None and completion.sent is not None:
        return completion.sent
    return [{"role": "system", "content": request.system}, {"role": "user", "content": request.user}]


class Transcript:
    """The transcript writer of one cycle; `recording(model)` makes every call of `model` a line."""

    def __init__(self, path: Path, secrets: Secrets, max_bytes: int):
        self.path, self.secrets, self.room = path, secrets, max_bytes
        self.calls = 0
        self.handle = None
        if max_bytes > 0:
            with contextlib.suppress(OSError):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, SECRET_FILE_MODE)
                self.handle = os.fdopen(fd, "a", encoding="utf-8", errors="backslashreplace")

    def recording(self, model: Model) -> "RecordedModel":
        return RecordedModel(model, self)

    def add(self, request: Request, completion: Completion | None, elapsed: float, error: str | None = None) -> None:
        self.calls += 1
        record: dict[str, Any] = {
            "call": self.calls,
            "purpose": request.purpose,
            "messages": sent_messages(request, completion),
        }
        if completion is not None and completion.tools is not None:
            record["tools"] = completion.tools  # the function definitions, exactly as sent
        if completion is not None:
            record.update(
                reply=completion.text, finish_reason=completion.finish_reason, usage=completion.usage.as_dict()
            )
            if completion.calls:
                record["tool_calls"] = [call.as_sent() for call in completion.calls]  # arguments as received
        else:
            record["error"] = error
        record["elapsed_s"] = round(elapsed, 3)
        self._write(self.secrets.redact(record))

    def _write(self, record: dict) -> None:
        if self.handle is None or self.room <= 0:
            return
        line = json.dumps(record, ensure_ascii=False) + "\n"
        size = len(line.encode("utf-8", "backslashreplace"))
        if size > self.room - CUT_LINE_ROOM:
            line = (
                json.dumps(
                    {
                        "call": record["call"],
                        "cut": "the transcript reached transcript_max_bytes; later requests are not recorded",
                    }
                )
                + "\n"
            )
            self.room = 0
        else:
            self.room -= size
        try:
            self.handle.write(line)
            self.handle.flush()  # `agent logs --transcript` may read it while the cycle runs
        except OSError:
            self.handle = None

    def close(self) -> None:
        if self.handle is not None:
            with contextlib.suppress(OSError):
                self.handle.flush()
                os.fsync(self.handle.fileno())
            with contextlib.suppress(OSError):
                self.handle.close()
            self.handle = None

    def __enter__(self) -> "Transcript":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RecordedModel:
    """A model whose every call (answered or failed) is added to a transcript."""

    def __init__(self, model: Model, transcript: Transcript):
        self.model, self.transcript = model, transcript

    @property
    def name(self) -> str:  # the model in use: with fallback_models, the one that answered
        return self.model.name

    def start(self, log: Log) -> None:
        self.model.start(log)

    def complete(self, request: Request) -> Completion:
        started = time.monotonic()
        try:
            completion = self.model.complete(request)
        except BaseException as exc:  # an interrupt too: the transcript shows where the cycle stopped
            self.transcript.add(request, None, time.monotonic() - started, f"{type(exc).__name__}: {exc}")
            raise
        self.transcript.add(request, completion, time.monotonic() - started)
        return completion


def read_transcript(path: Path) -> Iterator[dict]:
    """The whole records of a transcript file, in order (a line cut by a crash is skipped)."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if isinstance(record, dict):
                    yield record
