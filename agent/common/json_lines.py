"""JSON-lines files as the release before logs/agent.db wrote them: each whole record, oldest
first, one bounded line in memory at a time; a line torn by a crash is skipped, and a record glued
after a torn one (appends began each on a new line only later) is still found (agent/store/upgrade.py).

Those files are untrusted input: only a regular file is opened (never a link, a FIFO or a device:
`open_regular_file`), a line is read in pieces and one over `MAX_LINE_BYTES` is skipped without
ever being held whole, and what was skipped is counted in a `Skipped` for the caller to tell."""

from __future__ import annotations

import collections
import contextlib
import json
from pathlib import Path
from typing import BinaryIO, Iterator

from agent.common.safe_yaml import open_regular_file

MAX_GLUED_STARTS = 100  # object starts a torn line is searched at for the record glued after it
MAX_LINE_BYTES = 8 * 1024 * 1024  # a longer line is skipped: no record that release wrote comes near it
READ_BYTES = 1 << 16  # a line is read in pieces of this size
LONG_LINE = (f"line over {MAX_LINE_BYTES >> 20} MiB", f"lines over {MAX_LINE_BYTES >> 20} MiB")


class Skipped:
    """What the readers of an older release's files left out: a count per file and reason."""

    def __init__(self) -> None:
        self.counts: collections.Counter[tuple[str, tuple[str, str]]] = collections.Counter()

    def note(self, path: Path, reason: tuple[str, str]) -> None:
        """One more thing skipped in `path`: `reason` is its (singular, plural) wording."""
        self.counts[(str(path), reason)] += 1

    def __bool__(self) -> bool:
        return bool(self.counts)

    def line(self) -> str:
        """One line for a person: `path: 2 lines over 8 MiB, 1 cycle id not of this agent's form; ...`."""
        by_file: dict[str, list[str]] = {}
        for (path, (one, many)), count in sorted(self.counts.items()):
            by_file.setdefault(path, []).append(f"{count} {one if count == 1 else many}")
        return "; ".join(f"{path}: {', '.join(reasons)}" for path, reasons in by_file.items())


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


def bounded_lines(handle: BinaryIO, limit: int = MAX_LINE_BYTES) -> Iterator[bytes | None]:
    """Each line of `handle` without its b"\\n" (split on b"\\n" only: JSON leaves U+2028 and the
    like unescaped), or None for a line over `limit` bytes, of which at most `limit` bytes and one
    piece are ever held."""
    pending, over = bytearray(), False
    while piece := handle.read(READ_BYTES):
        start = 0
        while (newline := piece.find(b"\n", start)) != -1:
            if not over:
                pending += piece[start:newline]
            yield None if over or len(pending) > limit else bytes(pending)
            pending.clear()
            over, start = False, newline + 1
        if not over:
            pending += piece[start:]
            if len(pending) > limit:
                over = True
                pending.clear()
    if over or pending:
        yield None if over else bytes(pending)


def json_lines(path: Path, required_key: str, skipped: Skipped | None = None) -> Iterator[dict]:
    """Every whole record of a JSON-lines file, oldest first, one bounded line in memory at a time;
    a file that is not a regular one raises FileRefused (agent/common/safe_yaml.py)."""
    handle = open_regular_file(path)
    if handle is None:
        return
    with handle:
        for line in bounded_lines(handle):
            if line is None:
                if skipped is not None:
                    skipped.note(path, LONG_LINE)
                continue
            record = record_in(line.decode("utf-8", "replace"), required_key) if line.strip() else None
            if record is not None:
                yield record
