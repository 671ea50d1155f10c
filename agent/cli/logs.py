"""`agent logs [CYCLE] [-f] [--transcript]`: a cycle's log (or its exact transcript, from
logs/agent.db), the latest by default; `-f` follows a running cycle until it ends.

The end of a cycle is the release of the home's lock: the cycle writes its last log line (and
commits its last transcript record) before it lets go, so a follower that sees the lock free reads
once more and has every line. Every line printed has its control characters escaped (log lines
already are; a transcript holds what the model wrote, raw).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from agent.after.transcript import read_transcript
from agent.cli.common import existing_home, home_option, reports_errors
from agent.cli.history import cycle_running, recent_history
from agent.common.cycle_ids import cycle_started
from agent.common.escape import escape_controls
from agent.common.outcomes import UsageError
from agent.common.plain import plain
from agent.store.cycles import newest_cycle, record_of
from agent.store.home import Home

# How often a follower looks for new lines (checking the lock adds ~0.1 s while a cycle runs).
FOLLOW_POLL_SECONDS = 0.1


def chosen_cycle(home: Home, cycle_id: str | None) -> str:
    """The cycle asked for (`latest` or none: the newest with a log; idle cycles write none), or a
    usage error naming it."""
    latest = cycle_id in (None, "latest")
    wanted = newest_cycle(home) if latest else cycle_id
    if wanted and cycle_started(wanted) and home.cycle_log(wanted).is_file():
        return wanted
    recent = [r["cycle_id"] for r in recent_history(home, False, 50)]  # the newest with a log, not far back
    if latest:
        logged = next((i for i in reversed(recent) if home.cycle_log(i).is_file()), None)
        if not recent:
            raise UsageError(f"no cycles in {home.root} yet; run `agent run` first")
        return logged or recent[-1]
    if not (cycle_started(cycle_id) and record_of(home, cycle_id)[0]):
        near = ", ".join(recent[-3:]) or "none yet"
        raise UsageError(f"no cycle '{cycle_id}' in {home.root} (latest: {near}; `agent history` lists them all)")
    return cycle_id


def _existing(path: Path, home: Home, what: str, cycle_id: str) -> Path:
    if not path.is_file():
        raise UsageError(
            f"cycle {cycle_id} has no {what} ({path.relative_to(home.root)} is missing: the cycle "
            "was idle, was pruned, ran before transcripts were kept, or had transcript_max_bytes: 0)"
        )
    return path


def _echo_lines(text: str) -> None:
    for line in text.splitlines():
        click.echo(escape_controls(line))


def follow_file(path: Path, home: Home) -> None:
    """Print `path` and then whatever is appended to it, until no cycle holds the lock."""
    with open(path, "rb") as handle:
        pending = b""
        while True:
            running = cycle_running(home)  # asked before reading: lines written until the release are read below
            data = handle.read()
            if data:
                pending += data
                whole, _, pending = pending.rpartition(b"\n")
                if whole:
                    _echo_lines(whole.decode("utf-8", "replace"))
            if not running:
                break
            time.sleep(FOLLOW_POLL_SECONDS)
        if pending:
            _echo_lines(pending.decode("utf-8", "replace"))


def print_transcript(home: Home, cycle_id: str, follow: bool, as_json: bool) -> None:
    """A cycle's transcript, record by record; with `follow`, the records added until no cycle holds
    the lock."""
    seen, any_seen = 0, False
    while True:
        running = follow and cycle_running(home)  # asked before reading, as in follow_file
        for seen, record in read_transcript(home, cycle_id, seen):
            any_seen = True
            if as_json:
                click.echo(json.dumps(record, ensure_ascii=True))
            else:
                _echo_transcript_record(record)
        if not running:
            break
        time.sleep(FOLLOW_POLL_SECONDS)
    if not any_seen and not follow:
        raise UsageError(
            f"cycle {cycle_id} has no transcript (it was idle, was pruned, ran before transcripts were kept, "
            "or had transcript_max_bytes: 0)"
        )


@click.command()
@home_option
@click.argument("cycle_id", metavar="[CYCLE]", required=False)
@click.option("--follow", "-f", is_flag=True, help="Keep printing new lines until the running cycle ends.")
@click.option(
    "--transcript",
    is_flag=True,
    help="Print the cycle's exact transcript instead: every request's messages and every reply.",
)
@click.option("--json", "as_json", is_flag=True, help="With --transcript: the transcript's records as JSON lines.")
@reports_errors
def logs(home_dir: Path, cycle_id: str | None, follow: bool, transcript: bool, as_json: bool) -> None:
    """Print a cycle's log (the latest cycle by default), or follow a running one with -f.

    \b
      agent logs                      the latest cycle's log
      agent logs -f                   follow the running (or latest) cycle until it ends
      agent logs ID --transcript      every message sent to the model and every reply, exactly
    """
    home = existing_home(home_dir)
    if as_json and not transcript:
        raise UsageError(
            "--json goes with --transcript (a log is lines for people; `agent history --json` has each cycle's record)"
        )
    chosen = chosen_cycle(home, cycle_id)
    if transcript:
        return print_transcript(home, chosen, follow, as_json)
    path = _existing(home.cycle_log(chosen), home, "log", chosen)
    if follow:
        return follow_file(path, home)
    _echo_lines(path.read_text(encoding="utf-8", errors="replace"))


def _echo_transcript_record(record: dict) -> None:
    """One request and its reply, for a person: each message's role and its text, then the reply."""
    if "cut" in record:
        click.echo(f"--- {escape_controls(record['cut'])}")
        return
    call, purpose, took = (plain(record.get(key), "?") for key in ("call", "purpose", "elapsed_s"))
    click.echo(escape_controls(f"=== call {call} ({purpose}), {took}s"))
    if isinstance(record.get("tools"), list):
        names = [str((t.get("function") or {}).get("name")) for t in record["tools"] if isinstance(t, dict)]
        click.echo(
            f"--- tools ({len(names)} functions, exact definitions with --json): {escape_controls(', '.join(names))}"
        )
    for message in record.get("messages") or []:
        if isinstance(message, dict):
            click.echo(f"--- {escape_controls(plain(message.get('role'), '(no role)'))}")
            if message.get("content") is not None or "tool_calls" not in message:
                click.echo(escape_controls(plain(message.get("content"), "(no content)"), keep_newlines=True))
            _echo_calls(message.get("tool_calls"))
    if "error" in record:
        click.echo(f"--- error\n{escape_controls(record['error'])}")
    else:
        click.echo(
            escape_controls(
                f"--- reply (finish_reason {plain(record.get('finish_reason'), 'not given')}, "
                f"usage {plain(record.get('usage'), 'not given')})"
            )
        )
        if record.get("reply") or not record.get("tool_calls"):
            click.echo(escape_controls(plain(record.get("reply"), "(no text)"), keep_newlines=True))
        _echo_calls(record.get("tool_calls"))


def _exactly(arguments: object) -> str:
    """A call's arguments as they were sent: the JSON text, or JSON of what a provider decoded."""
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def _echo_calls(calls: object) -> None:
    """Native tool calls, one line each: id, name and the arguments exactly as sent or received."""
    for call in calls if isinstance(calls, list) else []:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            click.echo(
                escape_controls(
                    f"tool call {plain(call.get('id'), '(no id)')}: {plain(function.get('name'))} "
                    f"{_exactly(function.get('arguments'))}"
                )
            )
