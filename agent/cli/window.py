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
from agent.store.cycles import cycles_since, spent_by_day
from agent.store.home import Home

UNKNOWN_MODEL = "(not recorded)"
NOT_DETAILED = (StopReason.IDLE.value, "held", RUNNING)  # no model was asked: nothing to show in detail
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
    """The window's cycles as columns for the chart: start (epoch seconds), stop reason, task (an index
    into `tasks`: a task repeats over many cycles), error, cycle id, model, tokens and cost."""
    tasks: dict[str, int] = {}
    columns: dict[str, list] = {key: [] for key in ("t", "reason", "task", "error", "id", "model", "tokens", "cost")}
    for record in records:
        started = cycle_started(record["cycle_id"])
        task = _shown(record.get("task_before")) or ""
        columns["t"].append(None if started is None else int(started.timestamp()))
        columns["reason"].append(str(record.get("stop_reason") or "?"))
        columns["task"].append(tasks.setdefault(task, len(tasks)))
        columns["error"].append(_shown(record.get("error")))
        columns["id"].append(record["cycle_id"])
        columns["model"].append(_model(record))
        columns["tokens"].append(record_tokens(record))
        columns["cost"].append(record_cost(record, prices))
    return dict(columns, tasks=list(tasks))


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
