"""What `agent report` shows of one home over its window (the last `--days` UTC days): what its
cycles add up to, and the newest cycles in detail.

Only the window is read, and of it only what the page draws. Its cycles are those whose ids are
dated inside it: a range of the `cycle_window` index (the id and the stop reason, agent/store/migrations.py
m005), over which the database counts them per hour (or day) and stop reason, so no record is
parsed to draw a window of 100,000 cycles (bench/report.py); a mark per cycle, from the records,
only while the window holds at most MARKS_MAX. The incidents and the newest cycles are read newest
first, as far as the page shows them. Every sum is the one the other commands use: a day's cycles,
tokens and cost are `agent history --daily`'s (the spend the database keeps per UTC day and model),
a cycle's actions and its change `agent replay`'s and `agent diff`'s. A record's fields are named
in SQL in one place, agent/store/columns.py.
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
from agent.store.columns import STOP_REASON
from agent.store.cycles import cycles_since, newest_first, spent_by_day
from agent.store.db import records as database
from agent.store.home import Home
from agent.store.rows import loaded

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


MARKS_MAX = 2000  # up to this many cycles in the window: a mark each on the timeline; more: buckets
HOUR, DAY = 3600, 86400
# The window's cycles are a range of this index (migrations.py m005): named, since without the
# statistics of ANALYZE the planner would take the primary key and read every record.
CYCLES = "cycle INDEXED BY cycle_window"
_WINDOW = f"id >= ? AND ({STOP_REASON} IS NOT NULL OR files)"  # the window's cycles: recorded, or with files


def first_id(since: _dt.datetime) -> str:
    return since.strftime(SECOND_FORMAT)


def unrecorded_in_window(home: Home, running: bool, since: _dt.datetime) -> list[dict]:
    """The window's cycles the index has no stop reason for (killed, lost, running now; a hand-edited
    record), as `agent history` shows them, oldest first: few, read by the index."""
    rows = database(home, create=False).rows(
        f"SELECT id, record FROM {CYCLES} WHERE id >= ? AND {STOP_REASON} IS NULL AND (files OR record IS NOT NULL) "
        "ORDER BY id",
        (first_id(since),),
    )
    found = [
        dict(loaded(text) or {}, cycle_id=cycle_id, stop_reason="?", source="index")
        if text is not None
        else unrecorded_cycle(home, cycle_id)
        for cycle_id, text in rows
    ]
    newest = database(home, create=False).one(f"SELECT max(id) FROM {CYCLES} WHERE {_WINDOW}", (first_id(since),))
    if running and found and found[-1]["source"] == "snapshots" and found[-1]["cycle_id"] == newest[0]:
        found[-1] = unrecorded_cycle(home, found[-1]["cycle_id"], running=True)
    return found


def window_counts(buckets: dict) -> dict[str, int]:
    """How many cycles of the window ended for each reason (StopReason's order, then the others): the
    sums of its buckets."""
    counts: Counter = Counter()
    for row in buckets["counts"]:
        counts.update({reason: n for reason, n in zip(buckets["reasons"], row) if n})
    known = [reason.value for reason in StopReason if reason.value in counts]
    return {reason: counts[reason] for reason in [*known, *sorted(set(counts) - set(known))]}


def axis_start(home: Home, since: _dt.datetime) -> _dt.datetime:
    """Where the charts begin: the window's start, or the home's first cycle when it came later."""
    db = database(home, create=False)
    if db.one("SELECT 1 FROM cycle WHERE id < ? LIMIT 1", (first_id(since),)):
        return since
    first = db.one(f"SELECT min(id) FROM {CYCLES} WHERE {_WINDOW}", (first_id(since),))[0]
    started = cycle_started(first) if first else None
    return since if started is None else max(since, started.replace(minute=0, second=0, microsecond=0))


def bucket_width(days: int) -> int:
    return HOUR if days <= 31 else DAY


def _bucket_start(key: str, width: int) -> int | None:
    """The epoch seconds a bucket's key ('YYYYMMDD_HH' or 'YYYYMMDD', an id's start) begins at."""
    try:
        moment = _dt.datetime.strptime(key, "%Y%m%d_%H" if width == HOUR else "%Y%m%d")
    except ValueError:
        return None
    return int(moment.replace(tzinfo=_dt.timezone.utc).timestamp())


def timeline_buckets(home: Home, since: _dt.datetime, width: int, unrecorded: list[dict]) -> dict:
    """The window's cycles counted per bucket (an hour or a day, by the id's time) and stop reason, by
    the database: {width, t: each bucket's start, reasons, counts: each bucket's cycles per reason (a
    row of `reasons`' length, so the page's size is the buckets', however dense they are), first,
    last: its first and last cycle ids}, oldest first."""
    prefix = 11 if width == HOUR else 8  # YYYYMMDD_HH, YYYYMMDD
    rows = database(home, create=False).rows(
        f"SELECT substr(id, 1, {prefix}), {STOP_REASON}, count(*), min(id), max(id) FROM {CYCLES} "
        f"WHERE id >= ? AND {STOP_REASON} IS NOT NULL GROUP BY 1, 2",
        (first_id(since),),
    )
    rows += [
        (r["cycle_id"][:prefix], str(r.get("stop_reason") or "?"), 1, r["cycle_id"], r["cycle_id"]) for r in unrecorded
    ]
    buckets: dict[str, dict] = {}
    for key, reason, count, first, last in rows:
        bucket = buckets.setdefault(key, {"counts": {}, "first": first, "last": last})
        bucket["counts"][str(reason)] = bucket["counts"].get(str(reason), 0) + count
        bucket["first"], bucket["last"] = min(bucket["first"], first), max(bucket["last"], last)
    starts = {key: start for key in buckets if (start := _bucket_start(key, width)) is not None}
    keys = sorted(starts)  # an id that is not a time (a hand-made row) has no bucket
    reasons = sorted({reason for key in keys for reason in buckets[key]["counts"]})
    return {
        "width": width,
        "t": [starts[k] for k in keys],
        "reasons": reasons,
        "counts": [[buckets[k]["counts"].get(reason, 0) for reason in reasons] for k in keys],
        "first": [buckets[k]["first"] for k in keys],
        "last": [buckets[k]["last"] for k in keys],
    }


def window_timeline(home: Home, running: bool, since: _dt.datetime, buckets: dict, prices: dict) -> dict:
    """The timeline: a mark per cycle while the window holds at most MARKS_MAX, else its buckets."""
    if sum(sum(row) for row in buckets["counts"]) <= MARKS_MAX:
        return dict(timeline(window_records(home, running, since), prices), width=0)
    return buckets


CONSOLIDATIONS_SHOWN = 50  # the newest of the window's consolidations, on the page


def consolidation_records(home: Home, since: _dt.datetime) -> list[dict]:
    """The records of the window's newest CONSOLIDATIONS_SHOWN consolidations, oldest first (found by the index)."""
    rows = database(home, create=False).rows(
        f"SELECT record FROM {CYCLES} WHERE id >= ? AND {STOP_REASON} IN ('consolidated', 'consolidation_reverted') "
        "ORDER BY id DESC LIMIT ?",
        (first_id(since), CONSOLIDATIONS_SHOWN),
    )
    return [record for (text,) in reversed(rows) if (record := loaded(text)) is not None]


def _model(record: dict) -> str:
    model = record.get("model")
    return model if isinstance(model, str) and model else UNKNOWN_MODEL


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

INCIDENTS_SHOWN = 100  # the newest; the page says when there were more
INCIDENTS_READ = 2_000  # cycles of the window read, newest first, to find them (twice what status reads back)
# The stop reasons a cycle can be part of an incident with (agent/after/incidents.py): only these
# cycles' records are read; the others (a done cycle, say) only end one.
INCIDENT_REASONS = (
    StopReason.ERROR.value,
    StopReason.CONSOLIDATION_REVERTED.value,
    StopReason.AWAITING_APPROVAL.value,
    StopReason.STALLED.value,
    StopReason.BUDGET_EXHAUSTED.value,
    StopReason.HELD.value,
)
PASSED_OVER = (StopReason.IDLE.value, StopReason.CONSOLIDATED.value)  # neither continue nor end one


def _started(cycle_id: str | None) -> int | None:
    started = cycle_started(cycle_id) if cycle_id else None
    return None if started is None else int(started.timestamp())


def _incident_of(record: dict, key: str, ended: str | None) -> dict:
    held = record.get("stop_reason") == StopReason.HELD.value
    reason = record.get("held_for") if held else record.get("stop_reason")
    return {
        "key": key,
        "stop_reason": plain(reason, "?"),
        "held": held,
        "task": _shown(record.get("task_after")),
        "error": _shown(record.get("error")),
        "since": record["cycle_id"],
        "last": record["cycle_id"],
        "ended": ended,
        "cycles": 1,
        "complete": True,
    }


def _went_back(home: Home, incident: dict, close_after: int) -> None:
    """An incident open at the window's start began where the records before it say (read back as
    far as it goes, at most the cap `agent status` reads)."""
    from agent.after.incidents import incident_run

    earlier = incident_run(newest_first(home, before=incident["since"]), incident["key"], close_after)
    if earlier:
        incident["since"] = earlier[-1]["cycle_id"]
        incident["cycles"] += len(earlier)
        incident["error"] = incident["error"] or _shown(next((r.get("error") for r in earlier if r.get("error")), None))


def _fold_incidents(rows, close_after: int) -> tuple[list[dict], dict[str, list], bool]:
    """The incidents among (id, record) rows read newest first: (found, newest first; those that may go
    on further back, key -> [incident, cycles since its oldest]; whether reading stopped early)."""
    from agent.after.incidents import _endpoint, incident_key

    found: list[dict] = []
    going: dict[str, list] = {}  # key -> [incident, cycles read since its oldest one so far]: it may go on back
    newer: list[str] = []  # the ids read so far (newest first): the close_after-th newer one ended an incident
    endpoint = None  # an older record's endpoint: the nearest newer record's, as `incident_run` compares them
    for seen, (cycle_id, text) in enumerate(rows):
        if seen >= INCIDENTS_READ:
            return found, going, True
        record = dict(loaded(text) or {}, cycle_id=cycle_id) if text is not None else None
        endpoint = (record and _endpoint(record)) or endpoint
        key = incident_key(record, endpoint) if record is not None else None
        for other in [k for k in going if k != key]:
            going[other][1] += 1
            if going[other][1] >= close_after:
                going.pop(other)  # this many cycles apart: an earlier one is an incident of its own
        if key in going:
            current = going[key][0]
            current.update(since=cycle_id, cycles=current["cycles"] + 1)
            current["error"] = current["error"] or _shown(record.get("error"))
            going[key][1] = 0
        elif key is not None:
            if len(found) >= INCIDENTS_SHOWN:
                return found, going, True
            ended = newer[close_after - 1] if len(newer) >= close_after else None
            going[key] = [_incident_of(record, key, ended), 0]
            found.append(going[key][0])
        newer.insert(0, cycle_id)
        del newer[close_after:]
    return found, going, False


def incidents(home: Home, since: _dt.datetime, now: _dt.datetime, close_after: int | None = None) -> dict:
    """The window's incidents as `agent status` defines them (agent/after/incidents.py: one stop
    reason on one task, a failure of one kind at one endpoint; a held cycle is part of the one it
    holds after; over only after `close_after` cycles in a row not part of it), newest first, read
    newest first until INCIDENTS_SHOWN are found: each one's stop reason, task and newest error, the
    cycle that opened it (before the window, for one open at its start) and the one that ended it
    (None: open now), their times, its length and its cycles."""
    from agent.after.incidents import CLOSE_AFTER

    close_after = CLOSE_AFTER if close_after is None else close_after
    reasons = ", ".join(f"'{r}'" for r in INCIDENT_REASONS)
    passed = ", ".join(f"'{r}'" for r in PASSED_OVER)
    rows = database(home, create=False).stream(
        f"SELECT id, iif({STOP_REASON} IN ({reasons}), record, NULL) FROM {CYCLES} "
        f"WHERE id >= ? AND {STOP_REASON} IS NOT NULL AND {STOP_REASON} NOT IN ({passed}) ORDER BY id DESC",
        (first_id(since),),
    )
    found, going, more = _fold_incidents(rows, close_after)
    for current, _ in going.values():
        if more:
            current["complete"] = False  # it may go on further back than was read
        else:
            _went_back(home, current, close_after)
    for incident in found:
        incident["started"] = _started(incident["since"])
        incident["ended_at"] = _started(incident["ended"])
        end = incident["ended_at"] if incident["ended_at"] is not None else int(now.timestamp())
        incident["length_s"] = None if incident["started"] is None else max(0, end - incident["started"])
    return {"shown": found, "count": len(found), "more": more}


# ---------------------------------------------------------------------------------- memory

CONSOLIDATIONS = ("consolidated", "consolidation_reverted")  # `agent consolidate`'s cycles that asked a model


def consolidations(home: Home, records: list[dict]) -> list[dict]:
    """The window's consolidations, newest first: how each ended, and for each section it changed,
    the entries merged into successors (and how many successors), and the entries archived bare;
    a reverted one, why (the violations its record keeps). Read from the archive's rows of these
    cycles only (agent/store/archive.py `sections_left_since`)."""
    from agent.store.archive import sections_left_since

    found = [r for r in reversed(records) if r.get("stop_reason") in CONSOLIDATIONS]  # newest first
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


DETAIL_READ = 1000  # of the window's newest cycles read to find `--detail` kinds of cycle (as status reads back)


def _fold_key(record: dict) -> tuple:
    """Cycles that would read alike in detail: the same stop reason, task and failure kind (what went
    wrong as the runtime classifies it, never the server's wording: agent/after/incidents.py)."""
    from agent.after.incidents import record_kind

    return (record.get("stop_reason"), record.get("task_before"), record_kind(record) if record.get("error") else None)


def newest_worked(home: Home, since: _dt.datetime, count: int) -> list[tuple[dict, list[str]]]:
    """The newest `count` cycles of the window in which the model was asked, newest first, each with
    the ids of the older cycles just before it that were the same as it (folded into its row). At
    most DETAIL_READ cycles are read: a fold that reaches that far may go on further back."""
    if count <= 0:
        return []
    apart = ", ".join(f"'{r}'" for r in NOT_DETAILED)
    rows = database(home, create=False).stream(
        f"SELECT id, record FROM {CYCLES} WHERE id >= ? AND record IS NOT NULL "
        f"AND ({STOP_REASON} IS NULL OR {STOP_REASON} NOT IN ({apart})) ORDER BY id DESC",
        (first_id(since),),
    )
    found: list[tuple[dict, list[str]]] = []
    key = None
    for seen, (cycle_id, text) in enumerate(rows):
        if seen >= DETAIL_READ:
            break
        record = dict(loaded(text) or {}, cycle_id=cycle_id, source="index")
        mine = _fold_key(record)
        if found and mine == key:
            found[-1][1].append(cycle_id)
        elif len(found) >= count:
            break
        else:
            found.append((record, []))
            key = mine
    return found


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


def cycle_detail(
    home: Home, record: dict, secrets: Secrets, cycles: Any, alike: list[str] = (), models: tuple = ()
) -> dict:
    """One cycle for a person: its record, its actions in order (`agent replay`'s), the change to
    active.yaml (`agent diff ID`), the calls with side effects it made, its transcript, and the
    command that replays it."""
    from agent.cli.replay import actions

    cycle_id = record["cycle_id"]
    ran_on = record.get("model") if isinstance(record.get("model"), str) else None
    other = next((m for m in models if m != ran_on), None)  # another configured or fallback model
    replay = f"agent replay --home {shlex.quote(str(home.root))} {cycle_id}"
    return {
        "alike": len(alike),
        "alike_since": _started(alike[-1]) if alike else None,
        "alike_first": alike[-1] if alike else None,
        "started_at": _started(cycle_id),
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
        "replay": f"{replay} --model {shlex.quote(other)}" if other else None,
        "replay_bare": replay,
    }
