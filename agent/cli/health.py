"""How a home is doing, for `agent status`, `agent fleet` and `agent report`: the facts read of a
home (what `agent status` reads: the index's end, the running totals, the parked calls; the newest
20 cycles, never the whole history; and every file the runner needs, each checked before it is
opened), judged by the one computation the metrics file and the hook's record use too
(agent/after/health.py, whose docstring has the states).

A home needs a person when any of these holds (each one an `attention` item with a key, which
`agent fleet --state` remembers so that it reports each once):

- a file the runner cannot use (`broken`): config.yaml, rules.md, active.yaml, examples.yaml,
  logs/agent.db (its schema, not only its migration number), the workspace, a folder it cannot
  write, or no model at all (none configured, none installed, and no recent cycle ran on one given
  by --model or AGENT_MODEL);
- `down`: a slot of its `schedule` missed, or without one no cycle for longer than `stale_after`
  (three times its usual interval, the median gap between its last 20 cycles, ten minutes at least;
  a day while it has run fewer than two); or no cycle at all;
- an open incident, as `agent status` tells it (agent/after/incidents.py), a stall;
- a call parked for longer than a day; a daily or monthly budget spent;
- an entry of the agent's `surface: true` sections (`tell`);
- a folder that is not a home, or one this user cannot read (a bad glob must not blind the monitor).
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from typing import Any

import click

from agent.after.health import (
    INTERVAL_CYCLES,
    NOT_A_HOME,
    STATES,
    UNREADABLE,
    Facts,
    cycle_span,
    judge,
    problem,
    stale_after_s,
    usual_interval,
)
from agent.after.incidents import incident_text
from agent.cli.common import (
    clip,
    echo,
    existing_home,
    home_option,
    json_option,
    print_json,
    reports_errors,
    unusable_file,
)
from agent.cli.history import recent_history
from agent.common.outcomes import AgentError, DiskError, InvalidScratchpad, UsageError
from agent.common.times import age_text
from agent.config import Settings, load_settings
from agent.state import parse_time
from agent.store.home import Home

BUDGETS = (
    ("daily_token_budget", "today", "tokens"),
    ("daily_cost_budget", "today", "cost"),
    ("monthly_token_budget", "month", "tokens"),
    ("monthly_cost_budget", "month", "cost"),
)
NO_MODEL = "no model configured and the embedded model is not installed"
CONFIG = Home(Path(".")).config.name


def budgets_used(status: dict) -> list[dict]:
    """Each budget set: what its period used of it, and whether it is spent."""
    spending = status.get("spending") or {}
    rows = []
    for name, period, unit in BUDGETS:
        spent = spending.get(period) or {}
        limit = spent.get(f"{'token' if unit == 'tokens' else 'cost'}_budget")
        if limit is None:
            continue
        used = spent.get(unit, 0)
        rows.append(
            {
                "budget": name,
                "period": spent.get("day") or spent.get("month"),
                "used": used,
                "limit": limit,
                "fraction": round(used / limit, 4),
                "spent": used >= limit,
            }
        )
    return rows


# ------------------------------------------------------------------------------- broken files


def _kind(path: Path) -> str | None:
    """What is at `path` without opening it or following a link: None (nothing), 'file', or what else."""
    try:
        mode = os.lstat(path).st_mode
        if stat.S_ISLNK(mode):
            mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "folder"
    return "FIFO" if stat.S_ISFIFO(mode) else "socket" if stat.S_ISSOCK(mode) else "device"


def _file_problems(home: Home) -> tuple[list[dict], Settings | None]:
    """Each file of the home a cycle reads first, read as the cycle reads it (every reader refuses a
    FIFO or device before opening it): (the broken ones, the settings when config.yaml is usable)."""
    from agent.cycle.examples import read_examples
    from agent.cycle.prompt import read_rules
    from agent.scratchpad import read_state_file

    found, settings = [], None
    try:
        settings = load_settings(home.root)
    except UsageError as exc:
        config = _name(home, home.config)
        found.append(
            problem(config, _message(exc, home, config), "fix it (`agent doctor` says more); every run exits 2")
        )
    checks = (
        (home.rules, lambda: read_rules(home.rules), "make it a readable UTF-8 file, or remove it for the default"),
        (home.examples, lambda: read_examples(home.examples), "fix it, or remove it for the packaged examples"),
        (
            home.active,
            lambda: read_state_file(home.active, home.root),
            f"fix it by hand, or `agent restore` a snapshot; every run exits 6 until then (home {home.root})",
        ),
    )
    for path, read, fix in checks:
        try:
            read()
        except (UsageError, InvalidScratchpad) as exc:
            found.append(problem(_name(home, path), _message(exc, home, _name(home, path)), fix))
    return found, settings


def _name(home: Home, path: Path) -> str:
    """A file of the home as its lines name it: relative to the home (logs/agent.db)."""
    return str(path.relative_to(home.root))


def _message(exc: Exception, home: Home, name: str) -> str:
    """A reader's message, one line, without the file's name in front (the line names it first) or the
    home's path (the row names the home)."""
    text = str(exc).replace(f"{home.root}/", "")
    return clip(text.removeprefix(f"{name}: "), 200)


def _folder_problems(home: Home, settings: Settings | None) -> list[dict]:
    """The workspace and the folders a cycle writes: each a folder, writable where this user owns it
    (a monitor run as another user cannot tell who runs the home's cron line, so it judges only its own)."""
    found = []
    workspace = settings.workspace if settings is not None else "workspace"
    kind = _kind(home.root / workspace)
    if kind not in (None, "folder"):
        found.append(
            problem(f"{workspace}/", f"is a {kind}, not a folder", "move it away: the next cycle makes the folder")
        )
    for folder in (home.scratchpad, home.logs):
        name = f"{folder.name}/"
        kind = _kind(folder)
        if kind not in (None, "folder"):
            found.append(problem(name, f"is a {kind}, not a folder", f"move it away, then agent init {home.root}"))
            continue
        info = folder.stat() if kind else None
        if info is not None and info.st_uid == os.geteuid() and not os.access(folder, os.W_OK | os.X_OK):
            found.append(problem(name, "is not writable by its owner", f"chmod 700 {folder}"))
    return found


def _records_problems(home: Home) -> tuple[list[dict], AgentError | None]:
    """logs/agent.db: a regular file whose schema has every table and column the code uses, and the
    error opening it raised (every command raises it: `status` says it with its own exit code)."""
    from agent.store.db import records, schema_problems

    name = _name(home, home.database)
    fix = "move it away and restore it from a backup (a cycle exits 7 until then)"
    if _kind(home.database) is None:
        return [], None
    try:
        missing = schema_problems(records(home, create=False))
    except DiskError as exc:
        return [problem(name, _database_problem(exc, home), fix)], exc
    except (UsageError, InvalidScratchpad) as exc:  # written by a newer agent; an older release's file unreadable
        return [problem(name, clip(_message(exc, home, name), 200), "see the message; every run refuses too")], exc
    if not missing:
        return [], None
    said = f"is misshapen: {'; '.join(missing[:3])}"
    return [problem(name, said, fix)], DiskError(f"{home.database} {said}: move it away and restore it from a backup")


def _database_problem(exc: Exception, home: Home) -> str:
    """What is wrong with logs/agent.db, without its path (the line names the file) or the remedy."""
    return clip(str(exc).replace(str(home.database), "").split(": move it away")[0].strip(), 200)


def broken_files(home: Home) -> tuple[list[dict], Settings | None, AgentError | None]:
    """Every file of the home the runner cannot use, one problem each (see `problem`); the settings
    when config.yaml is usable; the error logs/agent.db raises when it cannot be used."""
    found, settings = _file_problems(home)
    records, error = _records_problems(home)
    return found + _folder_problems(home, settings) + records, settings, error


# --------------------------------------------------------------------------------- the facts


def _unix(stamp: Any) -> float | None:
    when = parse_time(stamp)
    return None if when is None else when.timestamp()


def _last(status: dict) -> dict | None:
    last = status["last_cycle"]
    if last is None:
        return None
    started = _unix(last.get("started"))
    ended = None if last.get("age_s") is None else time.time() - last["age_s"]
    return {
        "cycle_id": last["cycle_id"],
        "stop_reason": last["stop_reason"],
        "started": started,
        "ended": ended,
        "source": last.get("source"),
    }


def _model_problem(status: dict, recent: list[dict]) -> list[dict]:
    """No model anywhere a cycle looks: a problem only when cycles ran and no recent one ran on a
    model (a home run by `--model` or AGENT_MODEL from its cron line has none in config.yaml, and is
    fine). A home with no cycle yet says `never ran`, which needs a person already: how its cron
    line runs it (a flag or none) is not known until a cycle has run."""
    if status.get("config_error") != NO_MODEL or not recent:
        return []
    if any(isinstance(r.get("model"), str) and r["model"] for r in recent if r.get("source", "index") == "index"):
        return []
    return [problem(CONFIG, NO_MODEL, "set model in config.yaml, or pass --model on the cron line")]


def home_facts(
    home: Home,
    status: dict,
    recent: list[dict],
    problems: list[dict],
    settings: Settings | None,
    stale_override: float | None,
) -> Facts:
    """What `judge` needs, from what `agent status` read and the newest cycles."""
    settings = settings or Settings()
    spans = [span for span in (cycle_span(r) for r in recent if r.get("source", "index") == "index") if span]
    if status["running"]:
        spans.append((time.time(), time.time()))
    interval = usual_interval([start for start, _ in spans])
    approvals = status.get("approvals") or {}
    problems = list(problems) + _model_problem(status, recent)
    if status.get("approvals_error"):
        problems.append(problem("approvals", clip(status["approvals_error"], 160), "fix or remove the file it names"))
    incident = status.get("incident")
    return Facts(
        now=time.time(),
        last=_last(status),
        running=status["running"],
        incident=incident,
        incident_text=None if incident is None else clip(incident_text(incident), 240),
        stalled=bool((status.get("stall") or {}).get("stalled")),
        approvals_pending=approvals.get("pending", 0),
        approvals_oldest_age_s=approvals.get("oldest_age_s"),
        approvals_first_id=(approvals.get("ids") or [None])[0],
        budgets_spent=[(b["budget"], b["period"]) for b in budgets_used(status) if b["spent"]],
        surfaced=status.get("surfaced") or [],
        problems=problems,
        schedule=_schedule(settings),
        cycles=spans,
        usual_interval_s=interval,
        stale_after_s=stale_after_s(settings.stale_after, interval, stale_override),
    )


def _schedule(settings: Settings) -> Any:
    try:
        return settings.schedule_spec
    except ValueError:  # checked with the config: a broken one is config.yaml's problem
        return None


def home_health(folder: Path, stale_override: float | None = None) -> dict:
    """How the home in `folder` is doing (see the module's docstring); a folder that is not a home,
    or whose files cannot be read, is a row saying so that needs a person."""
    from agent.cli.inspect import status_report  # status's module: loaded by the commands that use it

    try:
        home = existing_home(folder)
    except (AgentError, OSError) as exc:
        return not_a_home(folder, exc)
    try:
        problems, settings, error = broken_files(home)
        if error is not None:
            return unusable_home(home, problems, error)
        status, lines = status_report(home)  # what `agent status` says (agent/cli/inspect.py)
        recent = recent_history(home, status["running"], INTERVAL_CYCLES)
    except DiskError as exc:  # a database that breaks while it is read
        name = _name(home, home.database)
        found = problem(name, _database_problem(exc, home), "move it away and restore it from a backup")
        return unusable_home(home, [found], exc)
    except (AgentError, OSError) as exc:  # a home whose records cannot be read (permissions)
        return not_a_home(folder, exc, home=True)
    facts = home_facts(home, status, recent, problems, settings, stale_override)
    return dict(health_row(home, status, facts), status_lines=lines)


def health_row(home: Home, status: dict, facts: Facts) -> dict:
    """The row every view prints: the judgement, beside what `agent status` said."""
    health = judge(facts)
    last = status["last_cycle"]
    age_s = None if facts.last is None else facts.now - (facts.last["ended"] or facts.last["started"] or facts.now)
    approvals = status.get("approvals") or {}
    today = (status.get("spending") or {}).get("today") or {}
    return {
        "home": str(home.root),
        "is_home": True,
        **{k: health[k] for k in ("state", "needs_person")},
        "running": status["running"],
        "last_cycle": last,
        "last_outcome": None if last is None else last["stop_reason"],
        "last_age_s": None if age_s is None else round(age_s, 1),
        "usual_interval_s": facts.usual_interval_s,
        "stale_after_s": round(facts.stale_after_s, 1),
        "stale": health["stale"],
        "incident": status.get("incident"),
        "stall": status.get("stall"),  # the current task's streak, as status counts it (agent/gates/stalls.py)
        "approvals_pending": approvals.get("pending", 0),
        "approvals_oldest_age_s": approvals.get("oldest_age_s"),
        "budgets": budgets_used(status),
        "cost_today": today.get("cost", 0.0),
        "unpriced_today": today.get("unpriced_cycles", 0),
        "attention": health["attention"],
        "problems": health["problems"],
        "schedule": health["schedule"],
        # told and not over yet (a flapping endpoint between failures): fleet --state keeps it as told
        "told_until_resolved": [f"incident:{c['key']}" for c in [status.get("incident_closing")] if c],
        "status": status,
    }


def public(row: dict) -> dict:
    """A row as `fleet --json` and `report --json` print it: without what `status` said in full."""
    return {key: value for key, value in row.items() if key not in ("status", "status_lines", "error")}


OWN_LINES = ("incident", "tell")  # attention that `status` prints on lines of their own


def status_lines(row: dict, lines: list[str]) -> list[str]:
    """`agent status`'s lines: the home, its state and schedule, what it said, then what needs a person."""
    head = [
        f"home:      {row['home']}",
        f"state:     {row['state']}" + ("  (needs a person)" if row["needs_person"] else ""),
    ]
    schedule = row.get("schedule")
    if schedule:
        grace = age_text(schedule["grace_s"])
        head.append(f"schedule:  {schedule['expression']} ({schedule['timezone']}, grace {grace}): {schedule['text']}")
    needs = [f"needs:     {i['text']}" for i in row["attention"] if i["key"].partition(":")[0] not in OWN_LINES]
    return head + lines[1:] + needs


def unusable_home(home: Home, problems: list[dict], error: Exception) -> dict:
    """The row of a home whose records cannot be read: its broken files, nothing else (`error`: what
    reading them raised, which `status` raises with its own exit code)."""
    health = judge(Facts(now=time.time(), problems=problems, records_read=False))
    return {
        "error": error,
        "home": str(home.root),
        "is_home": False,
        "state": health["state"],
        "problem": "; ".join(f"{p['file']}: {p['problem']}" for p in problems),
        "problems": problems,
        "attention": health["attention"],
        "needs_person": True,
    }


def not_a_home(folder: Path, exc: Exception, home: bool = False) -> dict:
    """The row of a folder that is not a home, or of a `home` whose files cannot be read: it needs a person."""
    if isinstance(exc, OSError):
        state, why = UNREADABLE, unusable_file(exc)
    else:
        state, why = (UNREADABLE, f"cannot use it: {exc}") if home else (NOT_A_HOME, str(exc))
    text = clip(why, 240)
    if state == NOT_A_HOME:  # one line for a monitor: what is wrong, not the whole remedy
        folder = Path(folder).expanduser()
        text = (
            "not a home: no such folder"
            if not folder.is_dir()
            else "not a home: it has no scratchpad/ folder"
            if not (folder / "scratchpad").is_dir()
            else f"not a home: {text}"
        )
    return {
        "error": exc,
        "home": str(Path(folder).expanduser().absolute()),
        "is_home": False,
        "state": state,
        "problem": why,
        "problems": [problem(str(folder), why, "", state)],
        "attention": [{"key": state, "text": text}],
        "needs_person": True,
    }


def most_pressing_first(rows: list[dict]) -> list[dict]:
    """Homes sorted by who needs a person: those that do first, then by state (STATES' order), the
    longest silent first, then by path."""

    def rank(row: dict) -> tuple[Any, ...]:
        state = STATES.index(row["state"]) if row["state"] in STATES else 0
        return (not row["needs_person"], state, -(row.get("last_age_s") or 0), row["home"])

    return sorted(rows, key=rank)


@click.command()
@home_option
@json_option
@reports_errors
def status(home_dir: Path, as_json: bool) -> None:
    """Is a cycle running, how did the last one end and when, the task now, and disk use."""
    home = existing_home(home_dir)
    row = home_health(home.root)
    if not row["is_home"]:  # records no command can read: the state and each problem, then exit 7 as every command
        if as_json:
            print_json(public(row))
        else:
            for line in status_lines(row, []):
                echo(line)
        raise row["error"]  # its one line and exit code, as every command says it (7: a database it cannot use)
    data, lines = row["status"], status_lines(row, row["status_lines"])
    if as_json:
        print_json({**data, **{k: row[k] for k in HEALTH_FIELDS}})
        return
    for line in lines:
        echo(line)


# What `status --json` adds of the home's health (agent/after/health.py), beside the fields it had.
HEALTH_FIELDS = ("state", "needs_person", "attention", "problems", "schedule", "stale")
