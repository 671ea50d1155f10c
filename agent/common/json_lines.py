"""JSON-lines files as the release before logs/agent.db wrote them: each whole record, oldest
first, one line in memory at a time; a line torn by a crash is skipped, and a record glued after a
torn one (appends began each on a new line only later) is still found (agent/store/upgrade.py)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Iterator

MAX_GLUED_STARTS = 100  # object starts a torn line is searched at for the record glued after it


def record_in(line: str, required_key: str) -> dict | None:
    """The record on one line: the whole line, or, when a torn record was glued to its front (a
    crash before appends began each on a new line), the whole record ending the line."""
    with contextlib.suppress(ValueError, RecursionError):
        record = json.loads(line)
        return record if isinstance(record, dict) and required_key in record else None
    decoder, end = json.JSONDecoder(), len(line.rstrip())
    start = line.find('{"', 1)  # '{"' outside a JSON string starts an object
    for _ in range(MAX_GLUED_STARTS):
        if start == -1:
            break
        with contextlib.suppress(ValueError, RecursionError):
            record, stop = decoder.raw_decode(line, start)
            if stop == end and isinstance(record, dict) and required_key in record:
                return record
        start = line.find('{"', start + 1)
    return None


def json_lines(path: Path, required_key: str) -> Iterator[dict]:
    """Every whole record of a JSON-lines file, oldest first, one line in memory at a time."""
    with contextlib.suppress(FileNotFoundError), open(path, "rb") as handle:
        for line in handle:  # split on b"\n" only: JSON leaves U+2028 and the like unescaped
            record = record_in(line.decode("utf-8", "replace"), required_key) if line.strip() else None
            if record is not None:
                yield record
