"""One record per cycle, for `agent history` and `agent status`, from structured records only.

A cycle that finishes writes its record to logs/agent.db (agent/store/cycles.py); those records
are used as they are. A cycle whose id was given but that has no record never finished: it was
killed (kill -9, an out-of-memory kill, power loss), or its record could not be written (disk
full). Such a cycle is shown from its snapshots, with no exit code: as `killed` when it has no
after snapshot (it died before saving), `incomplete` when it has one (its record was lost), or
`running` while it still holds the home's lock. Log lines are for people and are never read here.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import Any, Iterator

from agent.cli.common import clip, parse_duration
from agent.common.cycle_ids import cycle_started
from agent.common.outcomes import DiskError, InvalidScratchpad, StopReason, UsageError
from agent.scratchpad import read_state_file
from agent.state import parse_time
from agent.store.cycles import all_time, newest_cycles, record_of, unrecorded
from agent.store.home import Home, has_files
from agent.store.lock import is_locked

KILLED = "killed"  # a before snapshot, no after one, no record: the process died before saving
SAVED_NOTHING = object()  # the task after a cycle that has not saved (killed, running): shown as nothing at all
INCOMPLETE = "incomplete"  # both snapshots, no record: it was lost (disk full)
RUNNING = "running"  # on disk, no record yet, and a cycle holds the lock now

# The fields of a cycle record (agent.cycle.run writes them); an unrecorded cycle has them all, as None
# where its snapshots cannot tell.
RECORD_FIELDS = (
    "cycle_id",
    "started",
    "duration_s",
    "model",
    "stop_reason",
    "exit_code",
    "iterations",
    "task_before",
    "task_after",
    "usage",
    "error",
    "archived",
    "reflect",
    "cost",
)


def cycle_running(home: Home) -> bool:
    """Whether a cycle holds the home's lock now. False when the lock file cannot be opened
    (a read-only home, or another user's): reading history must not need write access."""
    try:
        return is_locked(home)
    except DiskError:
        return False


def history_newest_first(home: Home, running: bool) -> Iterator[dict]:
    """One record per cycle, newest first, read only as far as the caller goes: the cycles' own
    records (source "index") and, for cycles with files and no record, records read from their
    snapshots (source "snapshots"). `running`: whether a cycle holds the home's lock now; the
    newest cycle, when it has no record, is then the one running, not a killed one."""
    for n, (cycle_id, record) in enumerate(newest_cycles(home)):
        if record is None:
            yield unrecorded_cycle(home, cycle_id, running=running and n == 0)
        else:
            yield dict(record, source="index")


@dataclass(frozen=True)
class Shown:
    """Which cycles `history` shows: a pure filter over records. `since` and `until` bound when a cycle
    started (UTC); `reasons` keeps only those stop reasons (empty: all); `no_idle` hides the cycles
    that called no model (idle and held)."""

    since: _dt.datetime | None = None
    until: _dt.datetime | None = None
    reasons: frozenset[str] = frozenset()
    no_idle: bool = False

    def keeps(self, record: dict) -> bool:
        reason = record.get("stop_reason")
        if self.no_idle and reason in (StopReason.IDLE.value, StopReason.HELD.value):
            return False
        if self.reasons and reason not in self.reasons:
            return False
        started = parse_time(record.get("started"))
        if started is None:  # a record without a start time is shown only when no time bound is asked
            return self.since is None and self.until is None
        return (self.since is None or started >= self.since) and (self.until is None or started < self.until)

    def past(self, record: dict) -> bool:
        """Whether no record further back can be kept: this one's id is dated before `since` (ids keep
        running order when a clock steps back, and a cycle never started after the time in its id)."""
        cycle_id = record.get("cycle_id")
        started = cycle_started(cycle_id) if isinstance(cycle_id, str) else None
        return self.since is not None and started is not None and started < self.since


EVERY = Shown()


def parse_when(text: str, now: _dt.datetime) -> _dt.datetime:
    """A time for `--since` / `--until`: a UTC date (2026-11-24), an ISO time (UTC when it names no
    zone), or a duration ago (90m, 12h, 7d, 2w). UsageError (exit 2) for anything else."""
    when = parse_time(text.strip())
    if when is not None:
        return when
    try:
        return now - _dt.timedelta(seconds=parse_duration(text.strip()))
    except UsageError:
        raise UsageError(
            f"'{text}' is not a time: give a UTC date (2026-11-24), an ISO time (2026-11-24T08:00) "
            f"or a duration ago (90m, 12h, 7d, 2w)"
        ) from None


def recent_history(home: Home, running: bool, limit: int, shown: Shown = EVERY) -> list[dict]:
    """The newest `limit` records of `history_newest_first` that `shown` keeps (0: all), oldest first,
    read back only that far (with `since`, only back to it)."""
    found: list[dict] = []
    for record in history_newest_first(home, running):
        if shown.past(record) or (limit > 0 and len(found) >= limit):
            break
        if shown.keeps(record):
            found.append(record)
    return found[::-1]


def history_summary(home: Home, running: bool) -> tuple[dict | None, int, int]:
    """(the newest cycle's record, how many cycles, how many of them have no record) for `status`."""
    last = next(history_newest_first(home, running), None)
    missing = len(unrecorded(home))
    return last, all_time(home)["cycles"] + missing, missing


class KnownCycles:
    """The cycles a home knows of, for naming one on the command line (`resolve_snapshot`), without
    reading them all: the newest few, and any other id looked up by its files, then in the index."""

    def __init__(self, home: Home):
        self.home = home
        self.newest = [r["cycle_id"] for r in recent_history(home, False, 3)]

    def __bool__(self) -> bool:
        return bool(self.newest)

    def __getitem__(self, item):  # [-1]: the latest; [-3:]: the newest three, for a message
        return self.newest[item]

    def __contains__(self, cycle_id: object) -> bool:
        if not isinstance(cycle_id, str) or cycle_started(cycle_id) is None:
            return False
        return (
            cycle_id in self.newest or has_files(self.home, cycle_id) or record_of(self.home, cycle_id)[1] is not None
        )


def unrecorded_cycle(home: Home, cycle_id: str, running: bool = False) -> dict:
    """The record of a cycle the index lacks: what its id and snapshots say; the rest is None."""
    record: dict[str, Any] = dict.fromkeys(RECORD_FIELDS)
    started = cycle_started(cycle_id)
    before, after = (_snapshot_state(home, cycle_id, label) for label in ("before", "after"))
    record.update(
        cycle_id=cycle_id,
        started=None if started is None else started.isoformat(timespec="seconds"),
        stop_reason=RUNNING if running else KILLED if after is None else INCOMPLETE,
        source="snapshots",
        task_before=None if before is None else before["current_task"],
        task_after=None if after is None else after["current_task"],
    )
    return record


def _snapshot_state(home: Home, cycle_id: str, label: str) -> dict | None:
    """A snapshot's state; None when it is missing (pruned, or the cycle died first) or unusable."""
    try:
        return read_state_file(home.snapshot(cycle_id, label), home.root)
    except InvalidScratchpad:
        return None


# ---------------------------------------------------------------------------------- the table


HEADERS = ["CYCLE", "STARTED (UTC)", "TOOK", "ITER", "STOP", "TOKENS", "COST", "TASK"]
MIN_TASK_SIDE = 12  # never clip one side of "before -> after" shorter than this


def _unpriced(record: dict) -> bool:
    """A recorded cycle that used tokens but has no cost: its model has no price (nothing used costs nothing)."""
    usage = record.get("usage")
    used = isinstance(usage, dict) and bool(usage.get("total_tokens"))
    return record.get("source", "index") == "index" and record.get("cost") is None and used


def table_lines(records: list[dict], width: int | None) -> list[str]:
    """The history table: aligned columns, no control codes. The task column (last) takes the
    room left of `width` and is clipped to it; with no width (not a terminal) it is never clipped."""
    rows = [
        [
            str(r["cycle_id"]),
            _start(r.get("started")),
            _duration(r.get("duration_s")),
            "-" if r.get("iterations") is None else str(r["iterations"]),
            stop_cell(r),
            _tokens(r.get("usage")),
            cost_text(r.get("cost"), _unpriced(r)),
        ]
        for r in records
    ]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(HEADERS[:-1])]
    used = sum(widths) + 2 * len(widths)
    room = None if width is None else width - used
    lines = []
    for cells, record in zip([HEADERS[:-1], *rows], [None, *records]):
        if record is None:
            task = HEADERS[-1]
        else:
            unsaved = record.get("stop_reason") in (KILLED, RUNNING)
            task = task_change(record.get("task_before"), SAVED_NOTHING if unsaved else record.get("task_after"), room)
        lines.append("  ".join([*(cell.ljust(w) for cell, w in zip(cells, widths)), task]).rstrip())
        if record is not None and record.get("error"):  # why it failed: one line under its row
            lines.append(f"  error: {clip(record['error'], None if width is None else max(width - 9, 20))}")
    return lines


def stop_cell(record: dict) -> str:
    """The stop reason, with the calls with side effects the cycle made or found interrupted
    (agent/cycle/journal.py): `done, 2 calls, 1 interrupted`."""
    calls = record.get("calls") if isinstance(record.get("calls"), list) else []
    made = sum(1 for c in calls if isinstance(c, dict) and c.get("status") != "interrupted")
    cut = len(calls) - made
    held_for = record.get("held_for") if record.get("stop_reason") == StopReason.HELD.value else None
    return ", ".join(
        [
            str(record.get("stop_reason") or "?") + (f" ({held_for})" if isinstance(held_for, str) else ""),
            *([f"{made} call(s)"] if made else []),
            *([f"{cut} interrupted"] if cut else []),
        ]
    )


def task_change(before: Any, after: Any, room: int | None) -> str:
    """'before -> after' in at most `room` characters (None: whole), clipping the longer side first;
    `before` alone when `after` is SAVED_NOTHING (a cycle that died before saving)."""
    if after is SAVED_NOTHING:
        return clip(before or "(none)", room)
    before, after = clip(before or "(none)", None), clip(after or "(none)", None)
    if room is None or len(before) + len(after) + 4 <= room:
        return f"{before} -> {after}"
    room = max(room - 4, 2 * MIN_TASK_SIDE)
    half = room // 2
    before_room = len(before) if len(before) <= half else max(half, room - len(after))
    return f"{clip(before, before_room)} -> {clip(after, room - before_room)}"


def _duration(seconds: Any) -> str:
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool):
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    return f"{int(seconds) // 60}m{int(seconds) % 60:02d}s"


def _tokens(usage: Any) -> str:
    total = usage.get("total_tokens") if isinstance(usage, dict) else None
    return f"{total:,}" if isinstance(total, int) and total else "-"


def money(cost: Any) -> str:
    """A cost for people (4 decimals, in the prices' currency); '-' when there is none."""
    return f"{cost:.4f}" if isinstance(cost, (int, float)) and not isinstance(cost, bool) else "-"


def cost_text(cost: Any, unpriced: int | bool = False) -> str:
    """A cost that may not be computable: "unpriced" when none of it could be (the model has no
    price), the priced part and "(+N unpriced)" when only some of it could; never a false 0."""
    if unpriced is True or (unpriced and not cost):
        return "unpriced"
    return money(cost) + (f" (+{unpriced} unpriced)" if unpriced else "")


def _start(started: Any) -> str:
    if not isinstance(started, str):
        return "-"
    try:
        return _dt.datetime.fromisoformat(started).strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return started
