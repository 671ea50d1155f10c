"""Times as a person reads them: "Sat 28 Nov 10:00 UTC", "3d 8h" and "5d", never a cycle id.

Written out by hand, not with strftime's %a/%b, which follow the process's locale."""

from __future__ import annotations

import datetime as _dt

from agent.common.cycle_ids import cycle_started

_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def moment_text(when: _dt.datetime) -> str:
    """`Sat 28 Nov 10:00 UTC`: the day, date and minute in UTC (a naive time is taken as UTC)."""
    utc = (when if when.tzinfo else when.replace(tzinfo=_dt.timezone.utc)).astimezone(_dt.timezone.utc)
    return f"{_DAYS[utc.weekday()]} {utc.day} {_MONTHS[utc.month - 1]} {utc:%H:%M} UTC"


def span_text(seconds: float) -> str:
    """A length in its two largest units: `45s`, `12m`, `3h 5m`, `3d 8h` (the second left out when 0)."""
    whole = max(0, int(seconds))
    for size, unit, smaller, small_unit in ((86400, "d", 3600, "h"), (3600, "h", 60, "m")):
        if whole >= size:
            rest = (whole % size) // smaller
            return f"{whole // size}{unit}" + (f" {rest}{small_unit}" if rest else "")
    return f"{whole // 60}m" if whole >= 60 else f"{whole}s"


def age_text(seconds: float) -> str:
    """A duration in its largest whole unit: 45s, 3m, 2h, 5d."""
    seconds = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def record_started(record: dict) -> _dt.datetime | None:
    """When a cycle's record says it started (its `started`, else the time in its id); None: neither says."""
    started = record.get("started")
    if isinstance(started, str):
        try:
            parsed = _dt.datetime.fromisoformat(started)
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=_dt.timezone.utc)
        except ValueError:
            pass
    cycle_id = record.get("cycle_id")
    return cycle_started(cycle_id) if isinstance(cycle_id, str) else None


def record_ended(record: dict) -> _dt.datetime | None:
    """When a cycle ended: its start plus its `duration_s` (its start when that is missing or odd)."""
    started = record_started(record)
    duration = record.get("duration_s")
    if started is None or not isinstance(duration, (int, float)) or isinstance(duration, bool) or duration < 0:
        return started
    return started + _dt.timedelta(seconds=min(float(duration), 1e7))
