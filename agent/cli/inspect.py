"""Looking back and around: `agent diff`, `history`, `show` and `status`. These only read.

History and status come from the cycle records in logs/agent.db and the snapshots
(agent/cli/history.py); the current task always comes from active.yaml, the real state now.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import difflib
import itertools
import json
from pathlib import Path
from typing import Any, Iterator

import click

from agent.after.incidents import incident_text, open_incident
from agent.after.outlets import failing_outlets, outlet_lines
from agent.cli.archive_view import (
    NOTE,
    TASK,
    SectionArchive,
    archived,
    archived_counts,
    json_list,
    json_pieces,
    note_lines,
    queued_lines,
    task_lines,
)
from agent.cli.common import (
    clip,
    echo,
    existing_home,
    home_option,
    home_settings,
    json_option,
    print_json,
    reports_errors,
    seconds_since,
    size,
    task_text,
    terminal_width,
)
from agent.cli.diffing import summarize_change, summary_lines
from agent.cli.history import (
    KILLED,
    RUNNING,
    KnownCycles,
    Shown,
    cycle_running,
    history_newest_first,
    history_summary,
    parse_when,
    recent_history,
    table_lines,
)
from agent.cli.snapshots import latest_saved, resolve_snapshot
from agent.cli.spending import daily_lines, status_extras, with_costs
from agent.cli.waiting import approvals_status
from agent.common.escape import escape_controls, escape_json, escape_tree
from agent.common.outcomes import InvalidScratchpad, StopReason, UsageError
from agent.common.plain import counted, plain
from agent.common.times import age_text
from agent.config import load_settings
from agent.gates.budgets import newest_days
from agent.memory.queue_edits import DROPPED_GOAL, QUEUED_TASK, dropped_line
from agent.models.local.model import bundled_model_path, local_runtime_installed
from agent.scratchpad import load_state
from agent.state import FIELDS
from agent.store.cycles import disk, newest_first, newest_working_record
from agent.store.home import Home

# --------------------------------------------------------------------------------------- diff


def _styled_diff_line(line: str) -> str:
    if line.startswith(("+++", "---")):
        return click.style(line, bold=True)
    if line.startswith("@@"):
        return click.style(line, fg="cyan")
    if line.startswith("+"):
        return click.style(line, fg="green")
    if line.startswith("-"):
        return click.style(line, fg="red")
    return line


def snapshot_diff(home: Home, a: str, b: str, cycles: KnownCycles) -> dict:
    """What `agent diff A B --json` prints: {from, to, summary (field by field), diff (unified, of the YAML)}."""
    left, right = resolve_snapshot(home, a, "before", cycles), resolve_snapshot(home, b, "after", cycles)
    unified = difflib.unified_diff(
        left.text.splitlines(), right.text.splitlines(), fromfile=left.label, tofile=right.label, lineterm=""
    )
    return {
        "from": left.label,
        "to": right.label,
        "summary": summarize_change(left.state, right.state),
        "diff": "\n".join(unified),
    }


@click.command()
@home_option
@click.argument("a", required=False)
@click.argument("b", required=False)
@json_option
@click.option("--color/--no-color", default=None, help="Colour the diff (default: only when stdout is a terminal).")
@reports_errors
def diff(home_dir: Path, a: str | None, b: str | None, as_json: bool, color: bool | None) -> None:
    """Show what changed: a field-level summary, then a unified diff of the YAML.

    \b
      agent diff                 the latest cycle: its before vs its after snapshot
      agent diff ID              that cycle's before vs after
      agent diff ID1 ID2         ID1's before vs ID2's after (everything both cycles did)
      agent diff ID active       ID's before vs active.yaml now
      agent diff active          the latest cycle's after vs active.yaml (edits since)

    A cycle id may end in :before or :after to pick a snapshot; `latest` names the newest cycle with
    snapshots (an idle cycle has none).
    """
    home = existing_home(home_dir)
    cycles = KnownCycles(home)  # the newest few; any other id looked up when named
    if a is None:
        a = latest_saved(home, cycles)
    if b is None:
        if a == "active":
            a, b = "latest:after", "active"
        else:
            b = a.partition(":")[0]
    change = snapshot_diff(home, a, b, cycles)
    if as_json:
        print_json(change)
        return
    for line in summary_lines(change["summary"]):
        echo(line)
    click.echo()
    unified = change["diff"].split("\n") if change["diff"] else []
    if not unified:
        click.echo(f"no differences between {change['from']} and {change['to']}")
    for line in unified:
        click.echo(_styled_diff_line(escape_controls(line)), color=color)


# ------------------------------------------------------------------------------------ history


@click.command()
@home_option
@click.option(
    "--limit",
    "-n",
    type=click.IntRange(min=0),
    default=20,
    show_default=True,
    help="Show the newest N cycles (0: all).",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print every field of each cycle's record as JSON (with -n 0: the export)."
)
@click.option("--daily", is_flag=True, help="One row per UTC day instead: cycles, tokens and cost.")
@click.option(
    "--since", metavar="WHEN", help="Only cycles that started at or after WHEN: 2026-11-24, an ISO time, or 7d ago."
)
@click.option("--until", metavar="WHEN", help="Only cycles that started before WHEN (the same forms).")
@click.option(
    "--stop-reason",
    "reasons",
    multiple=True,
    type=click.Choice([r.value for r in StopReason]),
    metavar="REASON",
    help="Only cycles that ended with this stop reason (error, stalled, held, ...; repeat it for several).",
)
@click.option("--no-idle", is_flag=True, help="Hide the cycles that called no model (idle and held).")
@reports_errors
def history(
    home_dir: Path,
    limit: int,
    as_json: bool,
    daily: bool,
    since: str | None,
    until: str | None,
    reasons: tuple[str, ...],
    no_idle: bool,
) -> None:
    """One row per cycle, newest first: id, start, duration, iterations, stop reason, tokens, task;
    under a failed cycle's row, why it failed.

    Reads the cycle records in logs/agent.db, which every finished cycle writes. A cycle with files
    on disk but no record there is listed from its snapshots as `killed` (no after snapshot: it
    died before saving), `incomplete` (its record lost) or `running` (it holds the lock). The
    filters read the records back only as far as --since (and --limit) need.
    `agent history -n 0 --json` is the export of every record, streamed.
    """
    home = existing_home(home_dir)
    now = _dt.datetime.now(_dt.timezone.utc)
    shown = Shown(
        since=None if since is None else parse_when(since, now),
        until=None if until is None else parse_when(until, now),
        reasons=frozenset(reasons),
        no_idle=no_idle,
    )
    running = cycle_running(home)
    prices = home_settings(home.root).prices
    if daily and (reasons or no_idle):
        raise UsageError("--daily counts every cycle of a day: it takes --since, --until and --limit only")
    if as_json and not daily:  # streamed, one record at a time: the export of years of history
        kept = itertools.takewhile(lambda r: not shown.past(r), history_newest_first(home, running))
        records = with_costs((r for r in kept if shown.keeps(r)), prices)
        for piece in json_list(records if limit == 0 else itertools.islice(records, limit)):
            click.echo(escape_json(piece))
        return
    if daily:  # what the records spent per day: the newest `limit` days (0: all) in --since/--until
        bounded = shown.since is not None or shown.until is not None
        days = newest_days(home, prices, 0 if bounded else limit)
        records = [d for d in days if _day_shown(d["day"], shown)][: limit or None]
    else:  # --limit N: only the newest records are read (0: all)
        records = list(reversed(list(with_costs(recent_history(home, running, limit, shown), prices))))
    if as_json:
        print_json(records)
    elif not records:
        click.echo(f"no cycles in {home.root} yet; run `agent run` first")
    else:
        for line in (daily_lines if daily else table_lines)(records, terminal_width()):
            echo(line)


def _day_shown(day: str, shown: Shown) -> bool:
    """Whether a UTC day ('YYYY-MM-DD') overlaps the --since/--until window."""
    start = _dt.datetime.fromisoformat(day).replace(tzinfo=_dt.timezone.utc)
    after_since = shown.since is None or start + _dt.timedelta(days=1) > shown.since
    return after_since and (shown.until is None or start < shown.until)


# --------------------------------------------------------------------------------- show/status


@click.command()
@home_option
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="Also show the completed tasks, notes and memory section entries moved to the archive.",
)
@json_option
@reports_errors
def show(home_dir: Path, show_all: bool, as_json: bool) -> None:
    """Print the current state (scratchpad/active.yaml) for a person to read."""
    home = existing_home(home_dir)
    state = load_state(home)
    if as_json:
        _echo_state_json(home, state, show_all)
    else:
        for line in _state_lines(home, state, show_all):
            click.echo(line)


def _echo_state_json(home: Home, state: dict, show_all: bool) -> None:
    head: dict[str, Any] = {"path": str(home.active), "exists": home.active.exists(), "state": state}
    lists = (
        {"archived_completed_tasks": lambda: archived(home, TASK), "archived_notes": lambda: archived(home, NOTE)}
        if show_all
        else {}
    )
    counts = archived_counts(home) if show_all else {}
    if counts.get(QUEUED_TASK):  # tasks that left the queue without done, when any did
        lists["archived_queued_tasks"] = lambda: archived(home, QUEUED_TASK)
    if counts.get(DROPPED_GOAL):  # goals the model or the operator dropped, when any was
        lists["archived_goals"] = lambda: archived(home, DROPPED_GOAL)
    sections = SectionArchive(home, state) if show_all else None
    if sections is not None and sections.count:  # what left the memory sections, when anything did
        lists["archived_from_sections"] = sections.records
    for piece in json_pieces(head, lists):  # streamed: the archive is never all in memory
        click.echo(escape_json(piece))


def _bold(text: str) -> str:
    return click.style(text, bold=True)


def _or_none(lines: list[str]) -> list[str]:
    return lines or ["  (none)"]


def _state_lines(home: Home, state: dict, show_all: bool) -> Iterator[str]:
    """The state for a person, line by line; with show_all, the archive streamed in its place."""
    counts = archived_counts(home) if show_all else {}
    sections = SectionArchive(home, state) if show_all else None  # before the state is escaped for printing
    notes = [escape_controls(line) for line in state["notes"].split("\n")] if state["notes"] else []
    state = escape_tree(state)  # text the model wrote, about to be printed: each field on one line
    yield f"{_bold('current task:')} {state['current_task'] or '(none)'}"
    yield ""
    yield _bold(f"goals ({len(state['goals'])}):")
    yield from _or_none([f"  {i}. {g}" for i, g in enumerate(state["goals"], 1)])
    if show_all and counts[DROPPED_GOAL]:
        yield _bold(f"archived goals, dropped ({counts[DROPPED_GOAL]}):")  # each line says by whom
        yield from queued_lines(home, DROPPED_GOAL)
    yield _bold(f"pending ({len(state['pending_actions'])}):")
    yield from _or_none([f"  {i}. {p}" for i, p in enumerate(state["pending_actions"], 1)])
    if show_all and counts[QUEUED_TASK]:
        yield _bold(f"archived queued tasks, left without done ({counts[QUEUED_TASK]}):")
        yield from queued_lines(home)
    if show_all:
        yield _bold(f"archived completed ({counts[TASK]}):")
        yield from task_lines(home)
        if not counts[TASK]:
            yield "  (none)"
    yield _bold(f"completed ({len(state['completed_tasks'])}):")
    yield from _or_none([f"  - {task_text(t)}" for t in state["completed_tasks"]])
    if show_all and counts[NOTE]:
        yield _bold(f"archived notes ({counted(counts[NOTE], 'entry', 'entries')}):")
        yield from note_lines(home)
    if sections is not None and sections.count:
        yield _bold(f"archived from memory sections ({sections.count}):")
        yield from sections.lines()
    yield _bold(f"notes ({counted(len(notes), 'line')}):")
    yield from _or_none([f"  {line}" for line in notes])
    for key in (k for k in state if k not in FIELDS):
        yield f"{_bold(str(key) + ':')} {clip(json.dumps(state[key], default=str), 100)}"
    since = seconds_since(state["last_updated"])
    ago = "" if since is None else f" ({age_text(since)} ago)"
    yield f"{_bold('last updated:')} {state['last_updated'] or 'never'}{ago}"


def _records_size(home: Home) -> dict:
    """The database's size on disk, with its write-ahead log."""
    total = 0
    for path in (home.database, home.database.with_name(home.database.name + "-wal")):
        with contextlib.suppress(OSError):
            total += path.stat().st_size
    return {"path": str(home.database), "bytes": total}


def _configured_model(home_root: Path) -> tuple[str | None, str | None]:
    """(the model spec a cycle would use, a config problem) without opening any connection."""
    try:
        settings = load_settings(home_root)
    except UsageError as exc:
        return None, str(exc)
    if settings.model:
        return settings.model, None
    if local_runtime_installed() and bundled_model_path():
        return "local (embedded model)", None
    return None, "no model configured and the embedded model is not installed"


def _shell_policy(home_root: Path) -> dict | None:
    """The shell policy in force and why (None when the config cannot be read)."""
    from agent.tools.sandbox import policy_summary

    try:
        return policy_summary(home_root, load_settings(home_root))
    except UsageError:
        return None


def _current_task(home: Home) -> tuple[str | None, str | None]:
    """(the current task in active.yaml, why active.yaml cannot be read)."""
    try:
        return load_state(home)["current_task"], None
    except InvalidScratchpad as exc:
        return None, str(exc)


def _surfaced(home: Home) -> list[dict] | None:
    """What the agent wants a person to know: the entries of its `surface: true` sections in
    active.yaml (None: the home has no such section, or its state or config cannot be read)."""
    settings = home_settings(home.root)
    if not any(spec.surface for spec in settings.section_specs):
        return None
    from agent.memory.section_block import surfaced

    try:
        return surfaced(load_state(home), settings.section_specs)
    except InvalidScratchpad:  # said under "task now"
        return None


def _last_cycle(last: dict) -> dict:
    """What status tells of the newest cycle; age_s counts from its end (None when it did not end)."""
    since_start = seconds_since(last.get("started"))
    took = last.get("duration_s")
    took = took if isinstance(took, (int, float)) and not isinstance(took, bool) else 0
    ended = last.get("source") == "index" and since_start is not None
    return {
        "cycle_id": last["cycle_id"],
        "stop_reason": last.get("stop_reason"),
        "exit_code": last.get("exit_code"),
        "started": last.get("started"),
        "age_s": round(since_start - took, 1) if ended else None,
        "started_age_s": None if since_start is None else round(since_start, 1),
        "task_after": last.get("task_after"),
        "error": last.get("error"),
        "source": last.get("source"),
        "model": last.get("model"),
        "held_for": last.get("held_for"),
    }  # the model that cycle used (the configured one may differ now)


def _last_cycle_line(last: dict) -> str:
    if last["source"] == "index":
        code = f" (exit {last['exit_code']})" if last["exit_code"] is not None else ""
        when = f", ended {age_text(last['age_s'])} ago" if last["age_s"] is not None else ""
    else:
        code = {RUNNING: "", KILLED: " (no record: it died before it saved, by a signal it cannot catch)"}.get(
            last["stop_reason"], " (no record: its record was lost)"
        )
        when = f", started {age_text(last['started_age_s'])} ago" if last["started_age_s"] is not None else ""
    on = f" on {last['model']}" if isinstance(last.get("model"), str) else ""
    held = f" for {last['held_for']}" if isinstance(last.get("held_for"), str) else ""
    return f"{last['cycle_id']} {last['stop_reason'] or '?'}{held}{code}{on}{when}"


def status_report(home: Home) -> tuple[dict, list[str]]:
    """What `agent status` says of a home: its --json data, and its lines for a person (to escape).
    `agent fleet` and `agent report` read a home's health through here."""
    running = cycle_running(home)
    newest, cycles, unrecorded = history_summary(home, running)  # the newest record, and counts the database keeps
    current_task, scratchpad_error = _current_task(home)
    model, config_problem = _configured_model(home.root)
    last = _last_cycle(newest) if newest else None
    on_disk = {kind: {"files": files, "bytes": size} for kind, (files, size) in disk(home).items()}
    data = {
        "home": str(home.root),
        "running": running,
        "cycles": cycles,
        "last_cycle": last,
        "current_task": current_task,
        "scratchpad_error": scratchpad_error,
        "snapshots": on_disk["snapshots"],
        "logs": on_disk["logs"],
        "records": _records_size(home),
        "model": model,
        "config_error": config_problem,
        "shell_policy": _shell_policy(home.root),
    }
    surfaced = _surfaced(home)
    if surfaced is not None:  # a home with a surface: true section
        data["surfaced"] = surfaced
    extras, extra_lines = status_extras(newest_first(home), home, current_task)
    waiting, waiting_lines = approvals_status(home)
    settings = home_settings(home.root)
    now = _dt.datetime.now(_dt.timezone.utc)  # how long it has been failing: to now
    incident = open_incident(newest_first(home), settings.incident_close_after, now)  # back as far as it goes
    closing = None if incident else open_incident(newest_first(home), settings.incident_close_after, now, closing=True)
    data["incident_closing"] = closing  # not over yet: its newest cycles were not part of it (a flap)
    outlets = failing_outlets(
        home,
        {
            "on_cycle_end": bool(settings.on_cycle_end),
            "metrics_file": bool(settings.metrics_file),
            "otel": settings.otel,
        },
    )
    dropped = _dropped_tasks(home)
    data.update(extras, **waiting, incident=incident, outlets=outlets, dropped_tasks=dropped)
    lines = [
        f"home:      {home.root}",
        f"running:   {'yes: a cycle holds the lock now' if running else 'no'}",
        f"last:      {'no cycles yet' if last is None else _last_cycle_line(last)}",
        *([f"           error: {clip(last['error'], 200)}"] if last and last["error"] else []),
        f"task now:  {current_task or '(none)'}"
        if scratchpad_error is None
        else f"task now:  unknown: {clip(scratchpad_error, 200)}",
        f"cycles:    {cycles}" + (f" ({unrecorded} without a record)" if unrecorded else ""),
        f"snapshots: {on_disk['snapshots']['files']} file(s), {size(on_disk['snapshots']['bytes'])}",
        f"logs:      {on_disk['logs']['files']} file(s), {size(on_disk['logs']['bytes'])}",
        f"records:   {home.database.relative_to(home.root)}, {size(data['records']['bytes'])}",
        f"model:     {model or '(none)'}" + (f"  [config problem: {config_problem}]" if config_problem else ""),
    ]
    shell = data["shell_policy"]
    if shell:
        lines.append(f"shell:     {'WARNING: ' if shell['warning'] else ''}{shell['policy']} ({shell['why']})")
    if incident:
        lines.append(f"incident:  {incident_text(incident)}")
    tell = [  # the agent's SURFACE: one line each, escaped like every line
        f"tell:      [{item['section']}{' ' + str(item['id']) if item.get('id') else ''}] {clip(item['text'], 200)}"
        for item in surfaced or []
    ]
    dropped_lines = [
        f"dropped:   cycle {dropped['cycle_id']}: {dropped_line(dropped[key], noun=noun)}"
        for key, noun in (("tasks", "queued task"), ("goals", "goal"))
        if dropped and dropped[key]
    ]
    return data, lines + outlet_lines(outlets) + waiting_lines + extra_lines + dropped_lines + tell


def _dropped_tasks(home: Home) -> dict | None:
    """The queued tasks and goals the model dropped in the newest cycle that could change the state
    (idle and held ones skipped: an emptied queue makes the home idle), or None."""
    newest = newest_working_record(home) or {}
    found = {key: newest.get(key) for key in ("dropped_tasks", "dropped_goals")}
    found = {key: [plain(item) for item in items] for key, items in found.items() if isinstance(items, list)}
    if not any(found.values()):
        return None
    return {
        "cycle_id": newest.get("cycle_id"),
        "tasks": found.get("dropped_tasks", []),
        "goals": found.get("dropped_goals", []),
    }
