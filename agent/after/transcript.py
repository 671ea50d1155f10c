"""A cycle's transcript: every model request of a cycle and its reply, exactly, in logs/agent.db.

The cycle log says "iteration 1: prompt 4429 bytes"; the transcript keeps the chat messages the
provider really sent and the reply text it received, one record per request (the reflect call
too), committed as it is made, so a bad cycle can be read back (`agent logs --transcript`, even
while it runs) and replayed. Secrets are redacted before a record is written, and a transcript is
bounded: past `transcript_max_bytes` one `cut` record is written and later requests are left
out. A transcript that cannot be written (disk full) never fails the cycle; the state writes that
follow report the disk.

A record: {"call", "purpose", "messages", "reply", "finish_reason", "usage", "elapsed_s"} or, when
the request failed, "error" in place of the reply. A native request adds "tools" (the function
definitions sent) and, when the reply made calls, "tool_calls" (each with its arguments string
exactly as received). Retention deletes it with its cycle's log.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Iterator

from agent.common.outcomes import AgentError
from agent.models.base import Completion, Log, Model, Request
from agent.secrets import Secrets
from agent.store.db import records
from agent.store.home import Home
from agent.store.rows import loaded

# Room kept for the one record that says the transcript was cut.
CUT_LINE_ROOM = 200


def sent_messages(request: Request, completion: Completion | None) -> list[dict]:
    """The messages a request sent: the provider's own list when it gives one, else system + user."""
    if completion is not None and completion.sent is not None:
        return completion.sent
    return [{"role": "system", "content": request.system}, {"role": "user", "content": request.user}]


class Transcript:
    """The transcript writer of one cycle; `recording(model)` makes every call of `model` a record."""

    def __init__(self, home: Home, cycle_id: str, secrets: Secrets, max_bytes: int):
        self.home, self.cycle_id, self.secrets, self.room = home, cycle_id, secrets, max_bytes
        self.calls = 0
        self.failed = max_bytes <= 0
        self.timeline: list[ModelCall] = []  # every call, whether or not the transcript had room (traces.py)

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
        if self.failed or self.room <= 0:
            return
        text = json.dumps(record, ensure_ascii=False)
        size = len(text.encode("utf-8", "backslashreplace")) + 1
        if size > self.room - CUT_LINE_ROOM:
            text = json.dumps(
                {
                    "call": record["call"],
                    "cut": "the transcript reached transcript_max_bytes; later requests are not recorded",
                }
            )
            self.room = 0
        else:
            self.room -= size
        try:
            db = records(self.home)
            with db.write():
                db.execute("INSERT INTO transcript (format, cycle_id, record) VALUES (1, ?, ?)", (self.cycle_id, text))
        except AgentError:  # a full disk: the state writes that follow say so
            self.failed = True

    def close(self) -> None:
        """Nothing to close: each record is committed as it is made."""

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
        started, began_ns = time.monotonic(), time.time_ns()
        call = ModelCall(self.transcript.calls + 1, request.purpose, self.model.name, began_ns)
        self.transcript.timeline.append(call)
        try:
            completion = self.model.complete(request)
        except BaseException as exc:  # an interrupt too: the transcript shows where the cycle stopped
            call.ended_ns, call.error = time.time_ns(), type(exc).__name__
            call.error_kind = getattr(exc, "kind", None) if isinstance(getattr(exc, "kind", None), str) else None
            self.transcript.add(request, None, time.monotonic() - started, f"{type(exc).__name__}: {exc}")
            raise
        call.ended_ns, call.model, call.completion = time.time_ns(), self.model.name, completion
        self.transcript.add(request, completion, time.monotonic() - started)
        return completion


@dataclass
class ModelCall:
    """When one model call of a cycle began and ended (wall clock, ns), which model took it, and its
    completion or the error it raised: what a trace's model-call span is built from."""

    call: int  # its number in the cycle, as the transcript's record says
    purpose: str
    model: str  # the model in use (with fallback_models, the one that answered)
    began_ns: int
    ended_ns: int = 0
    completion: Completion | None = None
    error: str | None = None  # the exception's type
    error_kind: str | None = None  # ModelError.kind (FailureKind), when the raiser knew it


def read_transcript(home: Home, cycle_id: str, after: int = 0) -> Iterator[tuple[int, dict]]:
    """(its place, the record) of each request of a cycle's transcript after place `after`, in order."""
    rows = records(home, create=False).stream(
        "SELECT seq, record FROM transcript WHERE cycle_id = ? AND seq > ? ORDER BY seq", (cycle_id, after)
    )
    yield from ((seq, record) for seq, text in rows if (record := loaded(text)) is not None)
