"""`agent report`: one home, or several, over the last `--days` days, as one self-contained HTML file.

For each home: its health (what `agent fleet` says of it), a timeline of its cycles coloured by stop
reason, its tokens and cost per day by model against the daily budgets, the incidents, the newest
cycles in detail, and its memory sections (each one's fill, what the window's consolidations merged
and archived). Several homes get an index first, the ones that need a person at the top, and the
page opens with a line saying how many need one. Each home's state and what needs a person are
the one health judge's (agent/after/health.py, read by agent/cli/health.py), never judged here; what is read of the window is what the page draws
(agent/cli/window.py); the page is drawn by agent/cli/page.py.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

import click

from agent.cli.common import existing_home, home_option, home_settings, print_json, reports_errors
from agent.cli.health import home_health, most_pressing_first, public
from agent.cli.history import KnownCycles
from agent.common.outcomes import InvalidScratchpad
from agent.secrets import Secrets
from agent.store.home import Home

DEFAULT_OUTPUT = "report.html"


def memory_sections(home: Home, specs: tuple, since: _dt.datetime) -> dict | None:
    """Each section's fill (`agent memory`'s gauge), and what the window's consolidations merged and
    archived; None for a home without sections."""
    if not specs:
        return None
    from agent.cli.window import consolidation_records, consolidations
    from agent.memory.sections import entries_of, fill, text_of
    from agent.scratchpad import load_state
    from agent.setting_checks import by_stability

    records = consolidation_records(home, since)
    try:
        state = load_state(home)
    except InvalidScratchpad as exc:
        return {"sections": [], "problem": str(exc), "consolidations": consolidations(home, records)}
    rows = []
    for spec in by_stability(specs):
        used = len(entries_of(state, spec)) if spec.is_list else len(text_of(state, spec))
        rows.append(
            {
                "name": spec.name,
                "kind": spec.kind,
                "fill": fill(state, spec),
                "used": used,
                "limit": spec.limit,
                "fraction": round(used / spec.limit, 4) if spec.limit else 0,
                "read_only": spec.read_only,
                "surface": spec.surface,
            }
        )
    return {"sections": rows, "problem": None, "consolidations": consolidations(home, records)}


def replay_models(settings) -> tuple[str, ...]:
    """The models a cycle could be replayed on: the configured one and the fallbacks, in that order."""
    found = [settings.model, *(m.get("model") if isinstance(m, dict) else m for m in settings.fallback_models)]
    return tuple(dict.fromkeys(m for m in found if isinstance(m, str) and m))


def home_page(folder: Path, days: int, detail: int, now: _dt.datetime, stale_after: float | None = None) -> dict:
    """Everything the page shows of one home (a folder that is not a home: its health row alone).
    What it costs is bounded by what it draws: the window's counts and buckets are the database's
    (agent/cli/window.py), never a pass over every record of the window."""
    from agent.cli.window import (
        axis_start,
        bucket_width,
        cycle_detail,
        incidents,
        newest_worked,
        spending_by_day,
        timeline_buckets,
        unrecorded_in_window,
        window_counts,
        window_start,
        window_timeline,
    )

    health = home_health(folder, stale_after)
    if not health["is_home"]:
        return {"health": public(health)}
    home = Home.at(health["home"])
    settings = home_settings(home.root)
    since = window_start(days, now)
    unrecorded = unrecorded_in_window(home, health["running"], since)
    buckets = timeline_buckets(home, since, bucket_width(days), unrecorded)
    counts = window_counts(buckets)
    total = sum(counts.values())
    secrets = Secrets.from_settings(settings)
    cycles = KnownCycles(home)
    shown_from = axis_start(home, since)
    models = replay_models(settings)
    spending = spending_by_day(home, shown_from, now, settings.prices)
    page = {
        "health": health,
        "since": since.date().isoformat(),
        "shown_from": shown_from.date().isoformat(),
        "range": [int(shown_from.timestamp()), int(now.timestamp())],
        "cycles": total,
        "counts": counts,
        "currency": settings.currency,
        "spending": spending,
        "totals": spending_totals(spending),
        "budgets": {"tokens": settings.daily_token_budget, "cost": settings.daily_cost_budget},
        "timeline": window_timeline(home, health["running"], since, buckets, settings.prices),
        "incidents": incidents(home, since, now, settings.incident_close_after),
        "details": [
            cycle_detail(home, record, secrets, cycles, alike, models)
            for record, alike in newest_worked(home, since, detail)
        ],
        "memory": memory_sections(home, settings.section_specs, since),
    }
    return secrets.redact(page)  # everything on the page, with the secrets known now (transcripts: before clipping too)


def spending_totals(spending: dict) -> dict:
    """The window's tokens and cost, whole and per model: the charts' legends when nothing is hovered."""

    def total(rows: list[dict]) -> dict:
        return {
            "tokens": sum(r["tokens"] for r in rows),
            "cost": round(sum(r["cost"] for r in rows), 8),
            "unpriced": sum(r["unpriced_cycles"] for r in rows),
            "cycles": sum(r["cycles"] for r in rows),
        }

    return {"all": total(spending["days"]), "models": {m: total(rows) for m, rows in spending["models"].items()}}


def headline(pages: list[dict], now: _dt.datetime) -> dict:
    """The page's first line: how many of the homes need a person (health.py's verdict for each), the
    most pressing one's first problem (health.py's order), and when its open incident began."""
    from agent.common.cycle_ids import cycle_started

    rows = [page["health"] for page in pages]
    needing = [row for row in rows if row["needs_person"]]
    worst = most_pressing_first(needing)[0] if needing else None
    told_first = bool(worst and worst["attention"] and worst["attention"][0]["key"].startswith("incident:"))
    incident = worst.get("incident") or {} if told_first else {}
    began = cycle_started(incident["since"]) if incident.get("since") else None
    return {
        "homes": len(rows),
        "needing": len(needing),
        "worst_home": worst["home"] if worst else None,
        "worst": worst["attention"][0]["text"] if worst and worst["attention"] else None,
        "since": None if began is None else int(began.timestamp()),
        "for_s": None if began is None else max(0, int((now - began).total_seconds())),
    }


@click.command()
@click.argument("folders", metavar="[HOME...]", nargs=-1, type=click.Path(path_type=Path, readable=False))
@home_option
@click.option("--days", type=click.IntRange(min=1, max=366), default=30, show_default=True, help="The last N UTC days.")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    default=DEFAULT_OUTPUT,
    show_default=True,
    help="The HTML file to write (replaced whole).",
)
@click.option(
    "--detail",
    type=click.IntRange(min=0, max=100),
    default=5,
    show_default=True,
    help="How many of the newest cycles (idle ones left out) to show in detail.",
)
@click.option("--json", "as_json", is_flag=True, help="Print where the page went and each home's health as JSON.")
@reports_errors
def report(folders: tuple[Path, ...], home_dir: Path, days: int, output: Path, detail: int, as_json: bool) -> None:
    """Write one HTML page of a home's last N days (or, given several, an index and a part per home).

    \b
      agent report                         this home (--home, AGENT_HOME or .), to report.html
      agent report ~/agents/* -o fleet.html    an index of every home, most pressing first, then each

    The page needs no network: the charting library and the data are inside it, and it opens
    from file:// anywhere. Everything a model wrote is escaped, and transcripts are redacted.
    """
    from agent.cli.page import render
    from agent.common.files import atomic_write

    if not folders:
        existing_home(home_dir)  # one home, named by --home: not being one is an error (exit 2)
    now = _dt.datetime.now(_dt.timezone.utc)
    pages = [home_page(folder, days, detail, now) for folder in (folders or (home_dir,))]
    order = {id(h): n for n, h in enumerate(most_pressing_first([p["health"] for p in pages]))}
    pages.sort(key=lambda page: order[id(page["health"])])
    html = render(pages, days=days, now=now, index=len(folders) > 1, headline=headline(pages, now))
    atomic_write(output, html.encode("utf-8"))
    if as_json:
        homes = [public(p["health"]) for p in pages]
        print_json({"output": str(output.absolute()), "bytes": len(html.encode("utf-8")), "homes": homes})
    else:
        click.echo(f"wrote {output} ({len(pages)} home(s), the last {days} day(s))")
