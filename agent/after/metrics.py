"""`metrics_file`: the last cycle as Prometheus metrics, for node_exporter's textfile collector.

After every saved cycle the file is rewritten whole (a temporary file in the same folder, then a
rename: the collector never reads half a file, and it ignores the temporary's `.tmp` name). There
is no exporter of our own: node_exporter already runs where cron does. Every metric is named
`agent_...` with a `home` label, so one collector folder can hold the files of many homes: gauges
for the last cycle and the runs of failures and stalls, and counters that only grow (cycles by stop
reason, tokens, cost: what the database keeps of every record ever written, never lowered).

`metrics_text` is pure (the record in, the text out); `write_metrics` does the I/O and, like
everything after a cycle is saved, only logs a failure.
"""

from __future__ import annotations

import datetime as _dt
import math
from pathlib import Path
from typing import Any, Callable, Iterable

from agent.common.files import atomic_write
from agent.common.outcomes import StopReason, is_failure
from agent.config import Settings
from agent.store.cycles import all_time as spent_all_time
from agent.store.cycles import by_stop_reason, newest_first
from agent.store.home import Home

# Readable by node_exporter's user: the file holds counts and codes, never state or secrets.
METRICS_FILE_MODE = 0o644


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return value if ok else None


def _label_value(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


RUN_READ_CAP = 1000  # records read back at most: a longer run of failures or stalls is counted as this long
NO_MODEL_ASKED = (StopReason.IDLE.value, StopReason.HELD.value, StopReason.BUDGET_EXHAUSTED.value)


def _failed(record: dict) -> bool:
    return is_failure(record.get("stop_reason"))


def _held_stall(record: dict) -> bool:
    return record.get("stop_reason") == StopReason.HELD.value and record.get("held_for") == StopReason.STALLED.value


def consecutive(records: list[dict], counted: Callable[[dict], bool], passed_over: Callable[[dict], bool]) -> int:
    """How many of the newest records (oldest first in `records`) in a row are `counted`, the ones
    `passed_over` neither counting nor ending the run."""
    count = 0
    for record in reversed(records):
        if passed_over(record):
            continue
        if not counted(record):
            break
        count += 1
    return count


def failures_in_a_row(records: list[dict]) -> int:
    """Failed cycles in a row, newest first, until a cycle succeeds: cycles that asked no model (idle,
    held, a spent budget) are passed over, so an outage keeps counting however the ticks go."""
    return consecutive(records, _failed, lambda r: r.get("stop_reason") in NO_MODEL_ASKED)


def stalls_in_a_row(records: list[dict], stall_cycles: int | None = None) -> int:
    """The stall `status` shows: the cycles in a row the current task has ended without done (the
    newest record's `streak`, agent/gates/stalls.py), once that has reached `stall_cycles`; else 0.
    Records of an earlier release (no streak): stalled cycles in a row, the held ones after a stall
    included, idle cycles passed over."""
    newest = records[-1] if records else {}
    if isinstance(newest.get("streak"), int) and stall_cycles is not None:
        return newest["streak"] if newest["streak"] >= stall_cycles else 0
    return consecutive(
        records,
        lambda r: r.get("stop_reason") == StopReason.STALLED.value or _held_stall(r),
        lambda r: r.get("stop_reason") == StopReason.IDLE.value,
    )


def recent_runs(newest_first: Iterable[dict]) -> list[dict]:
    """The newest records, oldest first, as far back as a run of failures or stalls goes (at most
    RUN_READ_CAP): what `failures_in_a_row` and `stalls_in_a_row` count."""
    recent: list[dict] = []
    for record in newest_first:
        recent.insert(0, record)
        in_a_run = _failed(record) or _held_stall(record) or record.get("stop_reason") in NO_MODEL_ASKED
        if not in_a_run or len(recent) >= RUN_READ_CAP:
            break
    return recent


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


def metrics_text(
    home: str,
    record: dict,
    recent: list[dict],
    all_time: dict | None = None,
    stall_cycles: int | None = None,
    health: dict | None = None,
) -> str:
    """The metrics file for the cycle `record`, the newest of the records `recent` (oldest
    first), with the counters `all_time` ({"cycles": {stop reason: n}, "tokens", "cost"}: the running
    totals: `counters`); `stall_cycles`: the setting the stall is judged by; the home's `health` as the
    cycle leaves it (agent/after/health.py's `judge`)."""
    usage = record.get("usage") if isinstance(record.get("usage"), dict) else {}
    families = _gauges(record, usage, recent, stall_cycles) + _health_gauges(health) + _counters(all_time)
    lines = []
    for name, kind, help_text, samples in families:
        shown = [(labels, value) for labels, value in samples if _number(value) is not None]
        if not shown:  # a record without the field (no cost configured): no series rather than a false 0
            continue
        lines += [f"# HELP agent_{name} {help_text}", f"# TYPE agent_{name} {kind}"]
        for labels, value in shown:
            pairs = ",".join(f'{key}="{_label_value(str(val))}"' for key, val in {"home": home, **labels}.items())
            lines.append(f"agent_{name}{{{pairs}}} {value!r}")
    return "\n".join(lines) + "\n"


Family = tuple[str, str, str, Iterable[tuple[dict, Any]]]  # name, type, help, (labels, value) samples


def _counters(all_time: dict | None) -> list[Family]:
    """Counters that only grow (neither a prune nor `reset --clean` lowers them), so Prometheus can
    take rates and daily sums (increase(agent_tokens_total[1d]))."""
    if all_time is None:
        return []
    cycles = all_time.get("cycles", {})
    reasons = [r.value for r in StopReason] + sorted(set(cycles) - {r.value for r in StopReason})
    return [
        (
            "cycles_total",
            "counter",
            "Cycles recorded, by stop reason.",
            [({"reason": reason}, cycles.get(reason, 0)) for reason in reasons],
        ),
        ("tokens_total", "counter", "Tokens the recorded cycles used.", [({}, all_time.get("tokens"))]),
        (
            "cost_total",
            "counter",
            "What the recorded cycles cost, in the unit of the configured prices (cycles without a price add 0).",
            [({}, all_time.get("cost"))],
        ),
    ]


def _gauges(record: dict, usage: dict, recent: list[dict], stall_cycles: int | None = None) -> list[Family]:
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
            "Newest cycles in a row that failed (error, or a consolidation reverted), until one succeeds (cycles that asked no model are passed over).",
            [({}, failures_in_a_row(recent))],
        ),
        (
            "consecutive_stalls",
            "Once the current task has stalled, the cycles in a row it has ended without done (status's count; "
            "held cycles called no model and are not counted); 0 otherwise.",
            [({}, stalls_in_a_row(recent, stall_cycles))],
        ),
        (
            "surfaced_entries",
            "Entries the agent wants a person to know (its surface: true sections); no series without such a section.",
            [({}, (record.get("surfaced") or {}).get("count") if isinstance(record.get("surfaced"), dict) else None)],
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
    return [(name, "gauge", help_text, samples) for name, help_text, samples in families]


def _health_gauges(health: dict | None) -> list[Family]:
    """The home's state (as `agent fleet` says it) and, with a `schedule`, when the next cycle is due:
    timestamps, so an alert rule compares them with time() and fires even after cron stopped
    rewriting this file (docs/operations.md has the rules)."""
    if health is None:
        return []
    from agent.after.health import STATES

    schedule = health.get("schedule") or {}
    families: list[tuple[str, str, Iterable[tuple[dict, Any]]]] = [
        (
            "health_state",
            "1 for the home's state as the last cycle left it (agent fleet's STATE), 0 for the others.",
            [({"state": state}, int(health["state"] == state)) for state in STATES],
        ),
        (
            "needs_person",
            "1 when something needs a person (agent fleet would exit 1), else 0.",
            [({}, int(health["needs_person"]))],
        ),
        (
            "schedule_next_due_timestamp_seconds",
            "Unix time the next slot of `schedule` is due; no series without a schedule.",
            [({}, schedule.get("next_due"))],
        ),
        (
            "schedule_grace_seconds",
            "Seconds after a slot before it counts as missed (schedule_grace).",
            [({}, schedule.get("grace_s"))],
        ),
        (
            "schedule_last_met_slot_timestamp_seconds",
            "Unix time of the newest slot of `schedule` that a cycle met.",
            [({}, schedule.get("last_met_slot"))],
        ),
    ]
    return [(name, "gauge", help_text, samples) for name, help_text, samples in families]


def counters(home: Home) -> dict:
    """{"cycles": {stop reason: n}, "tokens", "cost"}: every record ever written, as the database
    keeps them (the `outcome` and `spend` tables, agent/store/migrations.py)."""
    spent = spent_all_time(home)
    return {"cycles": by_stop_reason(home), "tokens": spent["tokens"], "cost": spent["cost"]}


def metrics_path(home: Home, settings: Settings) -> Path | None:
    if not settings.metrics_file:
        return None
    path = Path(settings.metrics_file).expanduser()
    return path if path.is_absolute() else home.root / path


def write_metrics(
    home: Home, settings: Settings, record: dict, log: Callable[[str], None], health: dict | None = None
) -> str | None:
    """Rewrite the metrics file for the cycle `record` (already written), with the all-time counters
    the database keeps and the home's `health` (agent/after/health.py); None when it was written,
    else the problem (also logged)."""
    path = metrics_path(home, settings)
    if path is None:
        return None
    try:
        recent = recent_runs(newest_first(home))
        text = metrics_text(str(home.root), record, recent, counters(home), settings.stall_cycles, health)
        atomic_write(path, text.encode("utf-8"), mode=METRICS_FILE_MODE)
    except Exception as exc:  # a metrics file must never cost the cycle its result
        problem = f"{path}: {type(exc).__name__}: {exc}"
        log(f"metrics_file {problem}: not written")
        return problem
    return None
