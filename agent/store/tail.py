"""Reading JSON-lines files that grow for years (logs/index.jsonl, logs/archive.jsonl) in bounded
memory: backwards from the end (the newest records first, reading only as far as asked), or forwards
one line at a time. A record is found exactly as `read_jsonl` finds it (`files._record_in`): a torn
or foreign line is skipped, a record glued after a torn one is still found. Memory is one block plus
the longest line, never the whole file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

from agent.store.files import _record_in

BLOCK_BYTES = 64 * 1024


def _decode(line: bytes) -> str:
    return line.decode("utf-8", errors="replace")


def lines_backwards(path: Path, block: int = BLOCK_BYTES) -> Iterator[bytes]:
    """Every line of `path` (without its newline), the last first. A missing file has none."""
    try:
        handle = open(path, "rb")
    except FileNotFoundError:
        return
    with handle:
        position = handle.seek(0, os.SEEK_END)
        rest = b""  # the start of a line whose beginning is further back
        while position > 0:
            step = min(block, position)
            position -= step
            handle.seek(position)
            data = handle.read(step) + rest
            parts = data.split(b"\n")
            rest = parts[0]
            yield from reversed(parts[1:])
        yield rest


def records_backwards(path: Path, required_key: str, block: int = BLOCK_BYTES) -> Iterator[dict]:
    """Every whole record (a JSON object with `required_key`) of a JSON-lines file, newest first."""
    for line in lines_backwards(path, block):
        if line.strip():
            record = _record_in(_decode(line), required_key)
            if record is not None:
                yield record


def lines_forwards(path: Path, start: int = 0, block: int = BLOCK_BYTES) -> Iterator[tuple[bytes, int]]:
    """(line, the offset just after its newline) for every whole line from `start` on; a last
    line with no newline yet (torn, or being appended) is not given."""
    try:
        handle = open(path, "rb")
    except FileNotFoundError:
        return
    with handle:
        handle.seek(start)
        offset, pending = start, b""
        while True:
            data = handle.read(block)
            if not data:
                return
            parts = (pending + data).split(b"\n")
            pending = parts.pop()
            for line in parts:
                offset += len(line) + 1
                yield line, offset


def records_forwards(path: Path, required_key: str, start: int = 0) -> Iterator[dict]:
    """Every whole record of a JSON-lines file from byte `start` on, oldest first, one line in
    memory at a time; the last line is read even without its newline (like `read_jsonl`)."""
    offset = start
    for line, offset in lines_forwards(path, start):
        record = _record_in(_decode(line), required_key) if line.strip() else None
        if record is not None:
            yield record
    try:
        with open(path, "rb") as handle:  # a last line without a newline: a torn record, or a whole one
            handle.seek(offset)
            last = handle.read()
    except FileNotFoundError:
        return
    record = _record_in(_decode(last), required_key) if last.strip() and b"\n" not in last else None
    if record is not None:
        yield record
