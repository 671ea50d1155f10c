"""`agent fleet HOME...`: one row per home, and exit 1 when any of them needs a person.

Meant for a cron line or a monitoring job of its own, apart from the homes' cron lines: a home whose
scheduler stopped firing says nothing itself, so only something outside it can notice
(docs/operations.md has the recipe). What needs a person is the one health judge's
(agent/after/health.py, over the facts agent/cli/health.py reads); this module prints it, and with
`--state FILE` remembers what it last reported, so that each occurrence (an incident, a stale spell,
a missed slot, a parked call, a spent budget, a broken file, a `tell` entry) is printed, and so
mailed, once.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

from agent.cli.common import echo, print_json, reports_errors, silence_stdout
from agent.cli.health import home_health, most_pressing_first, public
from agent.cli.history import cost_text
from agent.common.outcomes import UsageError
from agent.common.times import age_text

NEEDS_A_PERSON = 1  # the exit code when any home needs a person (as `agent doctor`'s failed check)
STATE_FORMAT = 1
HEADERS = ("HOME", "LAST", "OUTCOME", "STATE", "DUE", "TODAY", "ATTENTION")


def parse_stale_after(_ctx: click.Context, _param: click.Parameter, value: str | None) -> float | None:
    if value is None:
        return None
    from agent.cli.maintain import parse_duration  # prune's --older-than reads durations the same way

    try:
        seconds = parse_duration(value)
    except UsageError as exc:
        raise click.BadParameter(str(exc)) from None
    if seconds <= 0:
        raise click.BadParameter(f"{value!r} is not a positive duration")
    return seconds


def row_cells(row: dict, shown: str) -> list[str]:
    """A home's row: as given on the command line, how long ago its last cycle ended, how it ended,
    its state, when its next cycle is due, what it spent today, what needs a person."""
    if not row["is_home"]:
        return [shown, "-", "-", row["state"], "-", "-", "; ".join(i["text"] for i in row["attention"])]
    last = "-" if row["last_age_s"] is None else f"{age_text(row['last_age_s'])} ago"
    return [
        shown,
        last,
        row["last_outcome"] or "-",
        row["state"],
        due_cell(row.get("schedule")),
        cost_text(row["cost_today"], row["unpriced_today"]),
        "; ".join(i["text"] for i in row["attention"]) or "-",
    ]


def due_cell(schedule: dict | None) -> str:
    """When the next cycle is due, by the home's `schedule` ('-' without one): 'in 4m', 'late 3m', 'missed 3'."""
    if not schedule:
        return "-"
    if schedule["missed"]:
        return f"missed {'≥' if schedule['missed_at_least'] else ''}{schedule['missed']}"
    wait = schedule["next_due"] - time.time()
    return f"in {age_text(wait)}" if wait > 0 else f"late {age_text(-wait)}"


def table_lines(rows: list[tuple[dict, str]]) -> list[str]:
    cells = [row_cells(row, shown) for row, shown in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(HEADERS[:-1])]
    return ["  ".join([*(c.ljust(w) for c, w in zip(line, widths)), line[-1]]).rstrip() for line in [HEADERS, *cells]]


def quiet_line(row: dict, shown: str) -> str:
    return f"agent: {shown} needs a person: " + "; ".join(i["text"] for i in row["attention"])


def read_reported(path: Path) -> dict[str, list[str]]:
    """What `--state FILE` last reported: {home: [attention keys]}; {} when the file does not exist yet.
    A file that is not one this command wrote is a usage error (exit 2), left as it is."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--state {path}: cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    reported = data.get("reported") if isinstance(data, dict) and data.get("format") == STATE_FORMAT else None
    if not isinstance(reported, dict) or not all(
        isinstance(keys, list) and all(isinstance(k, str) for k in keys) for keys in reported.values()
    ):
        raise UsageError(
            f"--state {path}: not a state file `agent fleet` wrote (move it away, or name another file; "
            "without it every home that needs a person is reported again)"
        )
    return reported


def write_reported(path: Path, rows: list[dict]) -> None:
    """Remember what needs a person now (what cleared is forgotten: it is told again if it comes back),
    and an incident not over yet (agent/after/incidents.py: incident_close_after), so a flap is told once."""
    from agent.common.files import atomic_write

    reported = {
        row["home"]: [item["key"] for item in row["attention"]] + row.get("told_until_resolved", [])
        for row in rows
        if row["attention"] or row.get("told_until_resolved")
    }
    text = json.dumps({"format": STATE_FORMAT, "reported": reported}, indent=1, sort_keys=True) + "\n"
    atomic_write(path, text.encode("utf-8"))


def news(row: dict, reported: dict[str, list[str]]) -> dict | None:
    """The row with only the attention items not reported last time; None when there are none."""
    told = set(reported.get(row["home"], ()))
    fresh = [item for item in row["attention"] if item["key"] not in told]
    return dict(row, attention=fresh) if fresh else None


@click.command()
# No check on the argument (click.Path would refuse a folder this user may not enter, and every other home's row
# with it): each home's row says what is wrong with it.
@click.argument("folders", metavar="HOME...", nargs=-1, required=True, type=click.Path(path_type=Path, readable=False))
@click.option(
    "--stale-after",
    metavar="DURATION",
    callback=parse_stale_after,
    help="No cycle for this long needs a person (90m, 12h, 2d), for every home; "
    "default: each home's stale_after setting, else three times its usual interval.",
)
@click.option(
    "--state",
    "state_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Remember what was reported in this file, and print only what was not reported before "
    "(cron mails each incident once).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one object per home as JSON.")
@click.option("--quiet", "-q", is_flag=True, help="Print only one line per home that needs a person.")
@reports_errors
def fleet(folders: tuple[Path, ...], stale_after: float | None, state_file: Path | None, as_json: bool, quiet: bool):
    """One row per home: its last cycle's age and outcome, its state, today's cost, what needs a person.

    \b
      agent fleet ~/agents/*                      the table; exit 1 when any home needs a person
      agent fleet --quiet --state S ~/agents/*    for cron: a line per new thing that needs a person

    A home needs a person when a file the runner needs is broken (config.yaml, rules.md,
    active.yaml, examples.yaml, logs/agent.db, the workspace), it is down (a slot of its schedule
    missed, or no cycle for longer than stale_after), has an open incident (failing, stalled, a
    parked call, a spent budget), a call parked for more than a day, or an entry the agent
    surfaced for a person; a folder that is not a home, or one this user cannot read, does too.
    Run it from another cron line than the homes' own, so that a scheduler that stopped is noticed.
    """
    reported = read_reported(state_file) if state_file else None
    rows = [(home_health(folder, stale_after), str(folder)) for folder in folders]
    order = {id(row): n for n, row in enumerate(most_pressing_first([row for row, _ in rows]))}
    rows.sort(key=lambda pair: order[id(pair[0])])
    shown = rows if reported is None else [(fresh, name) for row, name in rows if (fresh := news(row, reported))]
    try:
        _print(shown, as_json, quiet)
    except BrokenPipeError:  # the reader went away (`| head -1`): the exit code still says who needs a person
        silence_stdout()
    if state_file is not None:  # after printing: what could not be printed is told again next time
        write_reported(state_file, [row for row, _ in rows])
    if any(row["needs_person"] for row, _ in rows):
        raise SystemExit(NEEDS_A_PERSON)


def _print(shown: list[tuple[dict, str]], as_json: bool, quiet: bool) -> None:
    if as_json:
        print_json([public(row) for row, _ in shown])
    elif quiet:
        for row, name in shown:
            if row["needs_person"]:
                echo(quiet_line(row, name))
    elif shown:
        for line in table_lines(shown):
            echo(line)
    sys.stdout.flush()  # here, so that a closed pipe is found while the exit code is still ours
