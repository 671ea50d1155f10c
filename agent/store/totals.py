"""Running totals of the cycle index, so that a cycle and `agent status` read O(1), not years of history.

logs/totals.json holds what the index's records add up to (how many there are, tokens and recorded
cost per UTC day and month, the usage of records that carry no cost, by model, and all-time counters:
cycles by stop reason, tokens, recorded cost) and the disk use of
the cycles' snapshots and logs. It remembers how many bytes of the index it covers and a fingerprint
of their start, so a reader adds only the records appended since (normally none: every cycle saves
the totals right after its record), and recounts everything, streaming the index one line at a time,
when the file is missing, corrupt, from another version, or no longer matches the index (the index was
replaced, cut or deleted). Only the cycle runner and `agent prune` save it, under the lock, through
`atomic_write`; readers never write. It is derived data: deleting it loses nothing.

Disk use is counted at a recount (a scan of scratchpad/ and logs/), then kept up to date by each cycle
(its own snapshot pair and log, at the time its record is written) and by each prune; files a killed
cycle left, or files added or removed by hand, show at the next recount (delete the file to force one).

Day and month buckets are kept for last month and this month by the clock (budgets and `status` ask
for today and this month), and at most a few months after (records a wrong clock dated ahead), so the
file and a recount's memory stay the same size however long the history. A record counts once its
line ends with a newline.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from agent.state import parse_time
from agent.store.files import _record_in, atomic_write
from agent.store.home import Home
from agent.store.ids import SNAPSHOT_LABELS
from agent.store.tail import _decode, lines_forwards

TOTALS_NAME = "totals.json"
TOTALS_VERSION = 2  # 2: the all-time counters
FINGERPRINT_BYTES = 4096
MONTHS_KEPT = 6  # last month, this month, and a few a wrong clock put ahead


def totals_path(home: Home) -> Path:
    return home.logs / TOTALS_NAME


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def record_day(record: dict) -> str | None:
    """'YYYY-MM-DD', the UTC day a record started on; None when its `started` is not a time stamp."""
    when = parse_time(record.get("started"))
    return None if when is None else when.astimezone(_dt.timezone.utc).strftime("%Y-%m-%d")


def _bucket() -> dict:
    # cost: the sum of recorded costs; uncosted: per model, [cycles with tokens, prompt, completion] of
    # the records with no recorded cost (priced at read time, at the prices then in force)
    return {"cycles": 0, "tokens": 0, "cost": 0.0, "uncosted": {}}


def _add(bucket: dict, record: dict) -> None:
    usage = record.get("usage")
    tokens = _count(usage.get("total_tokens")) if isinstance(usage, dict) else 0
    bucket["cycles"] += 1
    bucket["tokens"] += tokens
    cost = record.get("cost")
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        bucket["cost"] = round(bucket["cost"] + float(cost), 8)
    elif isinstance(usage, dict):
        model = record.get("model") if isinstance(record.get("model"), str) else ""
        entry = bucket["uncosted"].setdefault(model, [0, 0, 0])
        entry[0] += tokens > 0
        entry[1] += _count(usage.get("prompt_tokens"))
        entry[2] += _count(usage.get("completion_tokens"))


def _fingerprint(path: Path, size: int) -> str:
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read(min(size, FINGERPRINT_BYTES))).hexdigest()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


@dataclass
class Totals:
    """What the index adds up to, and the disk use of snapshots and logs."""

    index_bytes: int = 0
    fingerprint: str = ""
    records: int = 0
    days: dict[str, dict] = field(default_factory=dict)
    months: dict[str, dict] = field(default_factory=dict)
    disk: dict[str, list[int]] = field(default_factory=lambda: {"snapshots": [0, 0], "logs": [0, 0]})
    # every record ever counted: cycles by stop reason, tokens, recorded cost (the metrics file's
    # counters): the index is never pruned, so neither a prune nor a recount lowers them
    all_time: dict = field(default_factory=lambda: {"cycles": {}, "tokens": 0, "cost": 0.0})
    recounted: bool = False  # made by a recount now (its disk use already holds every file)
    now: _dt.datetime | None = None  # the clock that decides which months are kept (None: the real one)

    def add_record(self, record: dict) -> None:
        self.records += 1
        _count_all_time(self.all_time, record)
        day = record_day(record)
        if day is None or record.get("source", "index") != "index":
            return
        _add(self.days.setdefault(day, _bucket()), record)
        _add(self.months.setdefault(day[:7], _bucket()), record)
        if len(self.months) > 4 * MONTHS_KEPT:  # a recount of years: bounded memory as it goes
            self._trim()

    def catch_up(self, index: Path) -> None:
        """Add the index's whole lines after the bytes already counted."""
        for line, end in lines_forwards(index, self.index_bytes):
            record = _record_in(_decode(line), "cycle_id") if line.strip() else None
            if record is not None and isinstance(record["cycle_id"], str):
                self.add_record(record)
            self.index_bytes = end
        self.fingerprint = _fingerprint(index, self.index_bytes) if self.index_bytes else ""
        self._trim()

    def _trim(self) -> None:
        """Keep the buckets of last month, this month (UTC, by the clock) and at most a few later ones (a
        clock that was wrong): the file and a recount stay O(1), and no record can push this month out."""
        today = (self.now or _dt.datetime.now(_dt.timezone.utc)).astimezone(_dt.timezone.utc)
        last_month = (today.replace(day=1) - _dt.timedelta(days=1)).strftime("%Y-%m")
        months = [month for month in sorted(self.months) if month >= last_month][:MONTHS_KEPT]
        self.months = {month: self.months[month] for month in months}
        self.days = {day: bucket for day, bucket in self.days.items() if day[:7] in months}

    def change_disk(self, added: Iterable[Path] = (), removed: Iterable[tuple] = ()) -> None:
        """Count files a cycle wrote (`added`, sized now) and files deleted (`removed`: (path, size) per
        file, or (a path of the kind, bytes, files) for many at once)."""
        if self.recounted:
            return
        for path in added:
            with contextlib.suppress(OSError):
                _tally(self.disk, path, path.stat().st_size, +1)
        for path, size, *files in removed:
            _tally(self.disk, path, size, -1, files[0] if files else 1)

    def as_json(self) -> dict:
        return {
            "version": TOTALS_VERSION,
            "index_bytes": self.index_bytes,
            "fingerprint": self.fingerprint,
            "records": self.records,
            "days": self.days,
            "months": self.months,
            "disk": self.disk,
            "all_time": self.all_time,
        }


def _count_all_time(counters: dict, record: dict) -> None:
    reason = record.get("stop_reason")
    if isinstance(reason, str) and record.get("source", "index") == "index":
        counters["cycles"][reason] = counters["cycles"].get(reason, 0) + 1
    usage = record.get("usage")
    counters["tokens"] += _count(usage.get("total_tokens")) if isinstance(usage, dict) else 0
    cost = record.get("cost")
    if isinstance(cost, (int, float)) and not isinstance(cost, bool) and cost > 0:
        counters["cost"] = round(counters["cost"] + float(cost), 8)


def _valid_all_time(counters: Any) -> bool:
    return (
        isinstance(counters, dict)
        and isinstance(counters.get("cycles"), dict)
        and all(isinstance(k, str) and type(v) is int for k, v in counters["cycles"].items())
        and type(counters.get("tokens")) is int
        and isinstance(counters.get("cost"), (int, float))
    )


def _kind(path: Path) -> str | None:
    name = path.name
    if any(name.endswith(f"_{label}.yaml") for label in SNAPSHOT_LABELS):
        return "snapshots"
    if name.startswith("cycle_") and name.endswith(".log"):
        return "logs"
    return None


def _tally(disk: dict[str, list[int]], path: Path, size: int, sign: int, files: int = 1) -> None:
    kind = _kind(path)
    if kind is not None:
        disk[kind][0] = max(0, disk[kind][0] + sign * files)
        disk[kind][1] = max(0, disk[kind][1] + sign * size)


def scan_disk(home: Home) -> dict[str, list[int]]:
    """The files and bytes of every snapshot and cycle log now: one pass over scratchpad/ and logs/."""
    disk = {"snapshots": [0, 0], "logs": [0, 0]}
    for folder in (home.scratchpad, home.logs):
        with contextlib.suppress(OSError), os.scandir(folder) as entries:
            for entry in entries:
                if _kind(Path(entry.name)) is not None:
                    with contextlib.suppress(OSError):
                        if entry.is_file(follow_symlinks=False):
                            _tally(disk, Path(entry.name), entry.stat(follow_symlinks=False).st_size, +1)
    return disk


def _valid_bucket(bucket: Any) -> bool:
    if not (
        isinstance(bucket, dict)
        and all(isinstance(bucket.get(k), int) and not isinstance(bucket.get(k), bool) for k in ("cycles", "tokens"))
    ):
        return False
    if not isinstance(bucket.get("cost"), (int, float)) or not isinstance(bucket.get("uncosted"), dict):
        return False
    return all(
        isinstance(v, list) and len(v) == 3 and all(isinstance(n, int) for n in v) for v in bucket["uncosted"].values()
    )


def _from_file(path: Path) -> Totals | None:
    """The saved totals; None when missing, unreadable, corrupt or from another version."""
    try:
        data = json.loads(path.read_bytes())
        disk = data["disk"]
        totals = Totals(
            data["index_bytes"],
            data["fingerprint"],
            data["records"],
            data["days"],
            data["months"],
            {kind: list(disk[kind]) for kind in ("snapshots", "logs")},
            data["all_time"],
        )
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None
    fine = (
        data.get("version") == TOTALS_VERSION
        and isinstance(totals.index_bytes, int)
        and totals.index_bytes >= 0
        and isinstance(totals.fingerprint, str)
        and isinstance(totals.records, int)
        and isinstance(totals.days, dict)
        and isinstance(totals.months, dict)
        and all(_valid_bucket(b) for b in [*totals.days.values(), *totals.months.values()])
        and all(len(v) == 2 and all(isinstance(n, int) for n in v) for v in totals.disk.values())
        and _valid_all_time(totals.all_time)
    )
    return totals if fine else None


def load_totals(home: Home, now: _dt.datetime | None = None) -> Totals:
    """The totals, caught up with the index; recounted (in bounded memory) when the saved ones
    cannot be used. Reads only. `now`: the time whose month and the one before are kept."""
    totals = _from_file(totals_path(home))
    size = _size(home.index)
    if totals is not None and totals.index_bytes:
        try:
            matches = size >= totals.index_bytes and _fingerprint(home.index, totals.index_bytes) == totals.fingerprint
        except OSError:
            matches = False
        if not matches:
            totals = None
    if totals is None:
        totals = Totals(disk=scan_disk(home), recounted=True)
    totals.now = now
    totals.catch_up(home.index)
    return totals


def save_totals(home: Home, totals: Totals) -> None:
    """Write the totals whole (call while holding the lock)."""
    atomic_write(totals_path(home), json.dumps(totals.as_json(), separators=(",", ":")).encode("utf-8"))


def update_totals(home: Home, added: Iterable[Path] = (), removed: Iterable[tuple] = ()) -> Totals:
    """Catch the totals up with the index, count files written and deleted, and save them (under the lock)."""
    totals = load_totals(home)
    totals.change_disk(added, removed)
    save_totals(home, totals)
    return totals
