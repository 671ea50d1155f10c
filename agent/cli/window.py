"""What `agent report` shows of one home over its window (the last `--days` UTC days): the cycles'
records, what they add up to, and the newest cycles in detail.

Only the window is read: the cycles whose ids are dated inside it (a range of the records database's
primary key: ids keep running order, and a cycle never started after the time in its id) and the
window's days of what the records spent, so a home with a million cycles reports as fast as one
with a thousand that has the same cycles inside the window (bench/report.py). Every sum is the one
the other commands use: a day's cycles, tokens and cost are `agent history --daily`'s (the spend
the database keeps per UTC day and model), a cycle's actions and its change `agent replay`'s and
`agent diff`'s.
"""

from __future__ import annotations

import datetime as _dt
import json
import shlex
from collections import Counter
from typing import Any

from agent.cli.history import RUNNING, unrecorded_cycle
from agent.common.cycle_ids import SECOND_FORMAT, cycle_started
from agent.common.escape import escape_controls
from agent.common.outcomes import AgentError, StopReason
from agent.common.plain import plain
from agent.gates.budgets import bucket_spending, record_cost, record_tokens
from agent.secrets import Secrets
from agent.store.cycles import cycles_since, newest_first, spent_by_day
from agent.store.home import Home

UNKNOWN_MODEL = "(not recorded)"
NOT_DETAILED = (StopReason.IDLE.value, StopReason.HELD.value, RUNNING)  # no model was asked: nothing to show in detail
TEXT_CHARS = 2000  # of a task or an error on the timeline
MESSAGE_CHARS = 20_000  # of one message of a transcript, on the page
TRANSCRIPT_CHARS = 300_000  # of one cycle's transcript, on the page (`agent logs ID --transcript` has it all)


def window_start(days: int, now: _dt.datetime) -> _dt.datetime:
    """The first moment of the window: midnight UTC, `days - 1` days before today."""
    today = now.astimezone(_dt.timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    return today - _dt.timedelta(days=days - 1)


def window_records(home: Home, running: bool, since: _dt.datetime) -> list[dict]:
    """The records of the cycles whose ids are dated at or after `since`, oldest first, as `agent
    history` shows them (source "index", or "snapshots" for a cycle without a record: killed, lost,
    or the one running now)."""
    found = [
        dict(record, source="index") if record is not None else unrecorded_cycle(home, cycle_id)
        for cycle_id, record in cycles_since(home, since.strftime(SECOND_FORMAT))
        if (cycle_started(cycle_id) or since) >= since
    ]
    if running and found and found[-1]["source"] == "snapshots":
        found[-1] = unrecorded_cycle(home, found[-1]["cycle_id"], running=True)
    return found


def _model(record: dict) -> str:
    model = record.get("model")
    return model if isinstance(model, str) and model else UNKNOWN_MODEL


def stop_reason_counts(records: list[dict]) -> dict[str, int]:
    """How many cycles of the window ended for each reason, in StopReason's order, then the others."""
    counts = Counter(str(r.get("stop_reason") or "?") for r in records)
    known = [reason.value for reason in StopReason if reason.value in counts]
    return {reason: counts[reason] for reason in [*known, *sorted(set(counts) - set(known))]}


def spending_by_day(home: Home, since: _dt.datetime, now: _dt.datetime, prices: dict) -> dict:
    """{days: `history --daily`'s rows for the window's days, oldest first; models: {model: its rows}}."""
    first, last = (moment.astimezone(_dt.timezone.utc).strftime("%Y-%m-%d") for moment in (since, now))
    whole, models = spent_by_day(home, first, last)

    def rows(buckets: dict[str, dict]) -> list[dict]:
        return [dict(day=day, **bucket_spending(buckets[day], prices)) for day in sorted(buckets)]

    return {
        "days": rows(whole),
        "models": {model or UNKNOWN_MODEL: rows(mine) for model, mine in sorted(models.items())},
    }


def _shown(text: Any, limit: int | None = TEXT_CHARS) -> str | None:
    """Model-written text for the page: controls escaped (a page shows them as they are), clipped."""
    if text is None:
        return None
    text = escape_controls(plain(text), keep_newlines=True)
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


def timeline(records: list[dict], prices: dict) -> dict:
    """The window's cycles as columns for the chart: start (epoch seconds), stop reason, what a held
    cycle waits on, task (an index into `tasks`: a task repeats over many cycles), error, cycle id,
    model, tokens and cost."""
    tasks: dict[str, int] = {}
    keys = ("t", "reason", "held_for", "task", "error", "id", "model", "tokens", "cost")
    columns: dict[str, list] = {key: [] for key in keys}
    for record in records:
        started = cycle_started(record["cycle_id"])
        task = _shown(record.get("task_before")) or ""
        columns["t"].append(None if started is None else int(started.timestamp()))
        columns["reason"].append(str(record.get("stop_reason") or "?"))
        columns["held_for"].append(plain(record.get("held_for")) if record.get("held_for") else None)
        columns["task"].append(tasks.setdefault(task, len(tasks)))
        columns["error"].append(_shown(record.get("error")))
        columns["id"].append(record["cycle_id"])
        columns["model"].append(_model(record))
        columns["tokens"].append(record_tokens(record))
        columns["cost"].append(record_cost(record, prices))
    return dict(columns, tasks=list(tasks))


# ---------------------------------------------------------------------------------- incidents

INCIDENTS_SHOWN = 100  # the newest; the page says how many there were in all


def _passed_over(record: dict) -> bool:
    """A cycle that neither continues nor ends an incident (agent/after/incidents.py): idle, or
    without a record."""
    return record.get("stop_reason") == StopReason.IDLE.value or record.get("source", "index") != "index"


def _opened(record: dict, key: str, home: Home, close_after: int, before_window: bool) -> dict:
    """An incident the window's `record` is the first of; near the window's start, where the records
    before the window say it began (read back only as far as it goes, as `agent status` reads it)."""
    from agent.after.incidents import incident_run

    endpoint = record.get("error_endpoint") if "error_kind" in record else None
    earlier = (
        incident_run(newest_first(home, before=record["cycle_id"]), key, close_after, endpoint) if before_window else []
    )
    first = earlier[-1] if earlier else record
    started = cycle_started(first["cycle_id"])
    return {
        "key": key,
        "since": first["cycle_id"],
        "since_time": None if started is None else started.isoformat(),
        "cycles": len(earlier),
        "error": _shown(next((r.get("error") for r in earlier if r.get("error")), None)),
        "ended": None,
        "apart": 0,
    }


def _continued(incident: dict, record: dict) -> None:
    held = record.get("stop_reason") == StopReason.HELD.value
    reason = record.get("held_for") if held else record.get("stop_reason")
    incident.update(
        stop_reason=plain(reason, "?"), held=held, task=_shown(record.get("task_after")), last=record["cycle_id"]
    )
    incident["cycles"] += 1
    incident["apart"] = 0
    incident["error"] = _shown(record.get("error")) or incident["error"]  # the newest, as status says


def _closed(still_open: dict, key: str | None, record: dict, close_after: int) -> None:
    """The open incidents `record` is not part of move one cycle nearer their end; at
    `close_after` cycles in a row they end there (agent/after/incidents.py)."""
    for other in [k for k in still_open if k != key]:
        still_open[other]["apart"] += 1
        if still_open[other]["apart"] >= close_after:
            still_open.pop(other)["ended"] = record["cycle_id"]


def incidents(home: Home, records: list[dict], close_after: int | None = None) -> dict:
    """The incidents of the window as `agent status` defines them (agent/after/incidents.py: one stop
    reason on one task, a failure of one kind at one endpoint; a held cycle is part of the one it
    holds after; over only after `close_after` cycles in a row not part of it), newest first: its stop
    reason, task and newest error, the cycle that opened it (before the window, for one open at its
    start) and the one that ended it (None: open now), its cycles."""
    from agent.after.incidents import CLOSE_AFTER, incident_keys

    close_after = CLOSE_AFTER if close_after is None else close_after
    worked = [r for r in records if not _passed_over(r)]
    found: list[dict] = []
    still_open: dict[str, dict] = {}
    for n, (record, key) in enumerate(zip(worked, incident_keys(worked))):
        _closed(still_open, key, record, close_after)
        if key is None:
            continue
        if key not in still_open:
            still_open[key] = _opened(record, key, home, close_after, before_window=n < close_after)
            found.append(still_open[key])
        _continued(still_open[key], record)
    for incident in found:
        incident.pop("apart")
    return {"shown": found[::-1][:INCIDENTS_SHOWN], "count": len(found)}


# ---------------------------------------------------------------------------------- memory

CONSOLIDATIONS = ("consolidated", "consolidation_reverted")  # `agent consolidate`'s cycles that asked a model


def consolidations(home: Home, records: list[dict]) -> list[dict]:
    """The window's consolidations, newest first: how each ended, and for each section it changed,
    the entries merged into successors (and how many successors), and the entries archived bare;
    a reverted one, why (the violations its record keeps). Read from the archive's rows of these
    cycles only (agent/store/archive.py `sections_left_since`)."""
    from agent.store.archive import sections_left_since

    found = [r for r in reversed(records) if r.get("stop_reason") in CONSOLIDATIONS]
    if not found:
        return []
    accepted = {r["cycle_id"]: {} for r in found if r["stop_reason"] == CONSOLIDATIONS[0]}
    if accepted:
        for cycle_id, section, _, successor, reason in sections_left_since(home, min(accepted)):
            if cycle_id in accepted and reason == "consolidate":
                moved = accepted[cycle_id].setdefault(section, {"merged": 0, "successors": set(), "archived": 0})
                if successor:
                    moved["merged"] += 1
                    moved["successors"].add(successor)
                else:
                    moved["archived"] += 1
    return [
        {
            "cycle_id": record["cycle_id"],
            "stop_reason": record["stop_reason"],
            "sections": [
                {"section": name, "merged": m["merged"], "into": len(m["successors"]), "archived": m["archived"]}
                for name, m in sorted(accepted.get(record["cycle_id"], {}).items())
            ],
            "violations": [_shown(v) for v in record.get("violations") or [] if isinstance(v, str)],
            "error": _shown(record.get("error")),
        }
        for record in found
    ]


# ---------------------------------------------------------------------------------- in detail


def newest_worked(records: list[dict], count: int) -> list[dict]:
    """The newest `count` cycles in which the model was asked, newest first."""
    return [r for r in reversed(records) if r.get("stop_reason") not in NOT_DETAILED][:count]


def _message_text(content: Any) -> str:
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, default=str)


def transcript_for_page(home: Home, cycle_id: str, secrets: Secrets) -> dict:
    """A cycle's transcript for the page: each request's messages and its reply (or error), redacted
    with the secrets known now too, escaped, each message clipped, the whole bounded."""
    from agent.after.transcript import read_transcript

    calls, room = [], TRANSCRIPT_CHARS
    for _, record in read_transcript(home, cycle_id):
        if room <= 0:
            return {"calls": calls, "missing": False, "clipped": True}
        record = secrets.redact(record)
        messages = [
            {"role": _shown(m.get("role"), 40), "content": _shown(_message_text(m.get("content")), MESSAGE_CHARS)}
            for m in record.get("messages") or []
            if isinstance(m, dict)
        ]
        call = {
            "call": plain(record.get("call"), "?"),
            "purpose": plain(record.get("purpose"), "?"),
            "elapsed_s": record.get("elapsed_s"),
            "cut": _shown(record.get("cut")),
            "messages": messages,
            "reply": _shown(record.get("reply"), MESSAGE_CHARS),
            "tool_calls": _shown(record["tool_calls"] and _message_text(record["tool_calls"]), MESSAGE_CHARS)
            if record.get("tool_calls")
            else None,
            "error": _shown(record.get("error"), MESSAGE_CHARS),
        }
        room -= sum(len(m["content"] or "") for m in messages) + len(call["reply"] or "")
        calls.append(call)
    return {"calls": calls, "missing": not calls, "clipped": False}


def _change(home: Home, cycle_id: str, cycles: Any, secrets: Secrets) -> dict:
    """What the cycle changed in active.yaml, as `agent diff ID` shows it: the fields, then the YAML."""
    from agent.cli.diffing import summary_lines
    from agent.cli.inspect import snapshot_diff

    try:
        change = secrets.redact(snapshot_diff(home, cycle_id, cycle_id, cycles))
    except AgentError as exc:
        return {"from": None, "to": None, "lines": [], "diff": [], "problem": _shown(exc)}
    return {
        "from": change["from"],
        "to": change["to"],
        "lines": [_shown(line, None) for line in summary_lines(change["summary"])],
        "diff": [_shown(line, None) for line in change["diff"].split("\n")] if change["diff"] else [],
        "problem": None,
    }


def cycle_detail(home: Home, record: dict, secrets: Secrets, cycles: Any) -> dict:
    """One cycle for a person: its record, its actions in order (`agent replay`'s), the change to
    active.yaml (`agent diff ID`), the calls with side effects it made, its transcript, and the
    command that replays it."""
    from agent.cli.replay import actions

    cycle_id = record["cycle_id"]
    model = record.get("model") if isinstance(record.get("model"), str) else "MODEL"
    return {
        "cycle_id": cycle_id,
        "started": record.get("started"),
        "stop_reason": record.get("stop_reason"),
        "exit_code": record.get("exit_code"),
        "model": _shown(record.get("model")),
        "iterations": record.get("iterations"),
        "tokens": record_tokens(record),
        "task_before": _shown(record.get("task_before")),
        "task_after": _shown(record.get("task_after")),
        "error": _shown(record.get("error"), None),
        "actions": [_shown(a) for a in actions(home, cycle_id, record.get("actions"))],
        "change": _change(home, cycle_id, cycles, secrets),
        "calls": [
            {key: _shown(call.get(key)) for key in ("call", "tool", "status")}
            for call in record.get("calls") or []
            if isinstance(call, dict)
        ],
        "transcript": transcript_for_page(home, cycle_id, secrets),
        "replay": f"agent replay --home {shlex.quote(str(home.root))} {cycle_id} --model {shlex.quote(model)}",
    }
