"""`metrics_file`: the last cycle as Prometheus metrics, for node_exporter's textfile collector.

After every saved cycle the file is rewritten whole (a temporary file in the same folder, then a
rename: the collector never reads half a file, and it ignores the temporary's `.tmp` name). There
is no exporter of our own: node_exporter already runs where cron does. Every metric is a gauge
named `agent_...` with a `home` label, so one collector folder can hold the files of many homes.

`metrics_text` is pure (the record in, the text out); `write_metrics` does the I/O and, like
everything after a cycle is saved, only logs a failure.
"""

from __future__ import annotations

import datetime as _dt
import math
from pathlib import Path
from typing import Any, Callable, Iterable

from agent.common.files import atomic_write
from agent.common.outcomes import StopReason
from agent.config import Settings
from agent.store.cycles import newest_first
from agent.store.home import Home

RUNS_COUNTED = (StopReason.ERROR.value, StopReason.STALLED.value)  # consecutive_failures, consecutive_stalls
RUNS_READ_CAP = 1000  # records read back at most: a longer run is counted as this long

# Readable by node_exporter's user: the file holds counts and codes, never state or secrets.
METRICS_FILE_MODE = 0o644


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return value if ok else None


def _label_value(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def consecutive(records: list[dict], stop_reason: str) -> int:
    """How many of the newest records in a row ended with `stop_reason`."""
    count = 0
    for record in reversed(records):
        if record.get("stop_reason") != stop_reason:
            break
        count += 1
    return count


def pending_approvals(record: dict) -> int:
    """Parked tool calls awaiting the operator, as the cycle's record tells (0 when it does not)."""
    return int(_number(record.get("pending_approvals")) or 0)


def _unix_time(stamp: Any) -> float | None:
    """An ISO time stamp (UTC when it names no zone) as unix time; None when it is not one."""
    try:
        when = _dt.datetime.fromisoformat(str(stamp))
    except ValueError:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=_dt.timezone.utc)).timestamp()


def ended_at(record: dict) -> float | None:
    """The unix time the cycle ended: its start plus its duration."""
    started = _unix_time(record.get("started"))
    return None if started is None else started + (_number(record.get("duration_s")) or 0)


def metrics_text(home: str, record: dict, recent: list[dict]) -> str:
    """The metrics file for the cycle `record`, the newest of the index records `recent`."""
    usage = record.get("usage") if isinstance(record.get("usage"), dict) else {}
    families: list[tuple[str, str, Iterable[tuple[dict, Any]]]] = [
        ("last_cycle_timestamp_seconds", "Unix time the last cycle ended.", [({}, ended_at(record))]),
        ("last_cycle_exit_code", "Exit code of the last cycle.", [({}, record.get("exit_code"))]),
        (
            "last_cycle_stop_reason",
            "1 for the stop reason the last cycle ended with, 0 for the others.",
            [({"reason": r.value}, int(record.get("stop_reason") == r.value)) for r in StopReason],
        ),
        (
            "last_cycle_model",
            "1, labelled with the model of the last cycle (with fallback_models: the one that answered).",
            [({"model": str(record.get("model"))}, 1)],
        ),
        ("last_cycle_iterations", "Model calls the last cycle made in its loop.", [({}, record.get("iterations"))]),
        (
            "last_cycle_tokens",
            "Tokens the last cycle used, by kind.",
            [({"kind": kind}, usage.get(f"{kind}_tokens")) for kind in ("prompt", "completion", "cached")],
        ),
        (
            "last_cycle_cost",
            "What the last cycle's model calls cost, in the unit of the configured prices.",
            [({}, record.get("cost"))],
        ),
        ("last_cycle_duration_seconds", "Seconds the last cycle took.", [({}, record.get("duration_s"))]),
        (
            "consecutive_failures",
            "Newest cycles in a row that failed (stop reason error).",
            [({}, consecutive(recent, StopReason.ERROR.value))],
        ),
        (
            "consecutive_stalls",
            "Newest cycles in a row that ended stalled.",
            [({}, consecutive(recent, StopReason.STALLED.value))],
        ),
        (
            "pending_approvals",
            "Tool calls parked until the operator approves or denies them.",
            [({}, pending_approvals(record))],
        ),
        (
            "oldest_pending_approval_timestamp_seconds",
            "Unix time the oldest pending parked call was parked "
            "(its age: time() minus this); no series when none waits.",
            [({}, _unix_time(record.get("oldest_pending_approval")))],
        ),
    ]
    lines = []
    for name, help_text, samples in families:
        shown = [(labels, value) for labels, value in samples if _number(value) is not None]
        if not shown:  # a record without the field (no cost configured): no series rather than a false 0
            continue
        lines += [f"# HELP agent_{name} {help_text}", f"# TYPE agent_{name} gauge"]
        for labels, value in shown:
            pairs = ",".join(f'{key}="{_label_value(str(val))}"' for key, val in {"home": home, **labels}.items())
            lines.append(f"agent_{name}{{{pairs}}} {value!r}")
    return "\n".join(lines) + "\n"


def metrics_path(home: Home, settings: Settings) -> Path | None:
    if not settings.metrics_file:
        return None
    path = Path(settings.metrics_file).expanduser()
    return path if path.is_absolute() else home.root / path


def write_metrics(home: Home, settings: Settings, record: dict, log: Callable[[str], None]) -> None:
    """Rewrite the metrics file for the cycle `record` (already written); failures are logged."""
    path = metrics_path(home, settings)
    if path is None:
        return
    try:
        recent = []  # the newest records, as far back as a run of failures or stalls goes
        for older in newest_first(home):
            recent.insert(0, older)
            if older.get("stop_reason") not in RUNS_COUNTED or len(recent) >= RUNS_READ_CAP:
                break
        atomic_write(path, metrics_text(str(home.root), record, recent).encode("utf-8"), mode=METRICS_FILE_MODE)
    except Exception as exc:  # a metrics file must never cost the cycle its result
        log(f"metrics_file {path} not written: {type(exc).__name__}: {exc}")
