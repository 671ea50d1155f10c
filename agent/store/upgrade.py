"""The upgrade from an older release's files: every record they hold, moved into logs/agent.db.

`move_in` runs when a home's database is made, and whenever it is opened and such files are there:
on a home's first run after the upgrade, and again if an older release ran on it since (what it
wrote moves in too). It
reads each file the older release wrote (the cycle index, the newest id given, the journal, the
archive, parked calls, the inbox, the probes) one line at a time, in one transaction that also
notes it is done; then the transcripts, a batch of files per transaction; then deletes the files.
A kill at any step leaves a home the next open finishes: nothing is moved in twice. A line torn by
a crash is skipped, and a record glued after a torn one is still found, as that release read them;
a file that cannot be read where it matters (parked calls) refuses the upgrade, changing nothing.
Derived files (totals.json, recall.sqlite3) are not read: the database keeps its own.

Those files are untrusted input, whatever wrote them. Only regular files are opened: a link (into
the home or out of it), a FIFO, a device or a folder where one of them should be refuses the
upgrade with one line naming it (exit 6), before anything is read from it and with the lock
released, so no command hangs on it or reads past the home. A line over `MAX_LINE_BYTES` is
skipped unread, and so is a record whose cycle id is not one this agent could have given
(`is_cycle_id`: an escape sequence, a made-up date, the year 9999); what was skipped is one warning
line on stderr.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from pathlib import Path

from agent.common.cycle_ids import CYCLE_ID, is_cycle_id
from agent.common.files import fault_point
from agent.common.json_lines import LONG_LINE, Skipped, bounded_lines, json_lines, record_in
from agent.common.outcomes import InvalidScratchpad
from agent.common.safe_yaml import FileRefused, open_regular_file
from agent.store.connection import Database
from agent.store.home import Home
from agent.store.lock import holding_lock
from agent.store.rows import add_archive, count_files, insert_record

BATCH_FILES, BATCH_BYTES = 256, 16 * 1024 * 1024  # transcript files moved in per transaction, at most
_STATUSES = ("pending", "approved", "denied", "ran")  # of a parked call
_CYCLE_FILE = re.compile(rf"(?:cycle_)?({CYCLE_ID.pattern})(?:_before\.yaml|_after\.yaml|\.log)")
_TRANSCRIPT = re.compile(r"cycle_(.+)\.transcript\.jsonl")
MAX_JSON_FILE_BYTES = 16 * 1024 * 1024  # a JSON file (parked calls, probes) over this is refused
OTHER_ID = ("cycle id not of this agent's form", "cycle ids not of this agent's form")


def move_in(db: Database, home: Home) -> None:
    """Move an older release's files into the database, under the home's lock when there are (an
    older release's cycle may be writing them), each step safe to run again after a kill: the files
    whose records are in are noted (name, inode, size, time) in the same transaction, so files left
    by a kill are not read twice, and files an older release wrote since are read."""
    older = any(os.path.lexists(path) for path in home.older_release_files)
    skipped = Skipped()
    with holding_lock(home, wait=60) if older else contextlib.nullcontext():
        try:
            _move_in(db, home, skipped)
        except FileRefused as exc:
            raise InvalidScratchpad(
                f"{exc}; an upgrade reads only regular files in the home: move it out of the home "
                "(or put the file it stands for in its place), then run again"
            ) from None
    if skipped:
        print(f"agent: warning: the upgrade skipped {skipped.line()}", file=sys.stderr)


def _move_in(db: Database, home: Home, skipped: Skipped) -> None:
    with db.write():
        found = _identities(home)
        noted = json.loads((db.one("SELECT files FROM upgrade") or ["[]"])[0])
        if not found or not all(one in noted for one in found):  # none: a new database, its cycles listed
            import_records(db, home, skipped)
            db.execute("DELETE FROM upgrade")
            db.execute("INSERT INTO upgrade VALUES (?)", (json.dumps(found),))
    import_transcripts(db, home, skipped)
    for path in home.older_release_files:
        path.unlink(missing_ok=True)
    fault_point("agent.db: older files removed")


def _identities(home: Home) -> list[list]:
    found = []
    for path in home.older_release_files:
        with contextlib.suppress(OSError):
            info = path.lstat()
            found.append([path.name, info.st_ino, info.st_size, info.st_mtime_ns])
    return found


def _json_file(path: Path) -> object:
    """The JSON value of a regular file (FileRefused for anything else), None when it is missing."""
    handle = open_regular_file(path)
    if handle is None:
        return None
    try:
        with handle:
            raw = handle.read(MAX_JSON_FILE_BYTES + 1)
        if len(raw) > MAX_JSON_FILE_BYTES:
            raise ValueError(f"over {MAX_JSON_FILE_BYTES >> 20} MiB")
        return json.loads(raw)
    except (OSError, ValueError, RecursionError) as exc:
        raise InvalidScratchpad(f"{path}: cannot be read ({exc}); fix or remove it, then run again") from None


def _with_cycle_ids(records, key: str, path: Path, skipped: Skipped):
    """The records whose `key` (a cycle id, or a call's `<cycle id>/<n>`) is one of ours; the rest noted."""
    for record in records:
        if is_cycle_id(str(record[key]).partition("/")[0] if key == "call" else record[key]):
            yield record
        else:
            skipped.note(path, OTHER_ID)


def import_records(db: Database, home: Home, skipped: Skipped | None = None) -> None:
    """Every record of the older release's files, into `db` (inside a transaction); what was
    skipped (over-long lines, ids not of ours) is counted in `skipped`."""
    skipped = Skipped() if skipped is None else skipped
    index = home.logs / "index.jsonl"
    for record in _with_cycle_ids(json_lines(index, "cycle_id", skipped), "cycle_id", index, skipped):
        insert_record(db, record)
    fault_point("agent.db: index imported")
    _cycles_on_disk(db, home, skipped)
    with contextlib.suppress(InvalidScratchpad, AttributeError, TypeError):  # a cache: the listing above will do
        newest = _json_file(home.logs / "cycles.json")
        if is_cycle_id(newest.get("newest")):  # the newest id ever given: new ids sort after it
            db.execute("INSERT OR IGNORE INTO cycle (id, files) VALUES (?, 0)", (newest["newest"],))
    calls = home.logs / "calls.jsonl"
    for record in _with_cycle_ids(json_lines(calls, "call", skipped), "call", calls, skipped):
        db.execute(
            "INSERT INTO call (format, call, event, record) VALUES (1, ?, ?, ?)",
            (str(record["call"]), str(record.get("event")), json.dumps(record)),
        )
    add_archive(db, _archive_records(home.logs / "archive.jsonl", skipped))
    fault_point("agent.db: archive imported")
    _import_parked(db, home.scratchpad / "approvals.json", skipped)
    for record in json_lines(home.scratchpad / "inbox.jsonl", "id", skipped):
        db.execute("INSERT INTO inbox (format, record) VALUES (1, ?)", (json.dumps(record),))
    for name in ("endpoint", "sandbox"):
        with contextlib.suppress(InvalidScratchpad):
            found = _json_file(home.logs / f"{name}.json")
            if isinstance(found, dict):  # remembered probes: an unreadable one is probed again
                db.execute("INSERT OR REPLACE INTO probe VALUES (?, 1, ?)", (name, json.dumps(found)))
    fault_point("agent.db: older records imported")


def _cycles_on_disk(db: Database, home: Home, skipped: Skipped) -> None:
    """Every cycle with a snapshot or log on disk (killed ones too): its files counted in its row;
    a file named like one but not after an id of ours (no such day, the year 9999) is noted."""
    for folder in (home.scratchpad, home.logs):
        with contextlib.suppress(FileNotFoundError), os.scandir(folder) as entries:
            for found in filter(None, (_CYCLE_FILE.fullmatch(entry.name) for entry in entries)):
                if is_cycle_id(found.group(1)):
                    count_files(db, home, found.group(1))
                else:
                    skipped.note(folder / found.group(0), OTHER_ID)


def _archive_records(path: Path, skipped: Skipped):
    """The archive's records; one whose cycle id is not of ours keeps its note under cycle `?`."""
    for record in json_lines(path, "kind", skipped):
        if "cycle_id" in record and not is_cycle_id(record["cycle_id"]):
            skipped.note(path, OTHER_ID)
            record = dict(record, cycle_id="?")
        yield record


def _import_parked(db: Database, path: Path, skipped: Skipped) -> None:
    calls = _json_file(path)
    if calls is not None and not (isinstance(calls, list) and all(_parked_call(c) for c in calls)):
        raise InvalidScratchpad(f"{path}: not a list of approval records; fix or remove it, then run again")
    for call in _with_cycle_ids(calls or [], "cycle_id", path, skipped):
        if db.one("SELECT 1 FROM approval WHERE id = ?", (int(call["id"]),)):  # written since the upgrade
            call = dict(call, id=str(db.one("SELECT max(id) + 1 FROM approval")[0]))
        db.execute("INSERT INTO approval VALUES (?, 1, ?, ?)", (int(call["id"]), call["status"], json.dumps(call)))


def _parked_call(call: object) -> bool:
    fields = call if isinstance(call, dict) else {}
    return all(isinstance(fields.get(key), str) for key in ("id", "cycle_id", "tool")) and (
        fields["id"].isdigit() and isinstance(fields.get("args"), dict) and fields.get("status") in _STATUSES
    )


def import_transcripts(db: Database, home: Home, skipped: Skipped | None = None) -> None:
    """The transcript files' lines into the database, a batch of files per transaction (at most
    `BATCH_FILES`, or `BATCH_BYTES` of them), each batch's files deleted once its rows commit. A
    file named after an id not of ours is left where it is, and noted."""
    skipped = Skipped() if skipped is None else skipped
    found = []
    with contextlib.suppress(FileNotFoundError), os.scandir(home.logs) as entries:
        for entry in entries:
            named = _TRANSCRIPT.fullmatch(entry.name)
            if named and is_cycle_id(named.group(1)):
                found.append((entry.name, entry.stat(follow_symlinks=False).st_size))
            elif named:
                skipped.note(home.logs / entry.name, OTHER_ID)
    while found:
        size, batch = 0, []
        while found and len(batch) < BATCH_FILES and size < BATCH_BYTES:
            name, bytes_ = found.pop()
            batch.append(name)
            size += bytes_
        with db.write():
            for name in batch:
                _import_transcript(db, home.logs / name, skipped)
        fault_point("agent.db: transcripts imported")
        for name in batch:
            (home.logs / name).unlink(missing_ok=True)


def _import_transcript(db: Database, path: Path, skipped: Skipped) -> None:
    cycle_id = _TRANSCRIPT.fullmatch(path.name).group(1)
    handle = open_regular_file(path)  # before the rows go: a file another process moved in meanwhile is skipped
    if handle is None:
        return
    with handle:
        db.execute("DELETE FROM transcript WHERE cycle_id = ?", (cycle_id,))  # moved in before a kill
        for line in bounded_lines(handle):
            if line is None:
                skipped.note(path, LONG_LINE)
                continue
            record = record_in(line.decode("utf-8", "replace"), "call") if line.strip() else None
            if record is not None:
                db.execute(
                    "INSERT INTO transcript (format, cycle_id, record) VALUES (1, ?, ?)",
                    (cycle_id, json.dumps(record, ensure_ascii=False)),
                )
