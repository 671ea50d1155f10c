"""The report's page: a Jinja2 template (report.html.j2, in pages/ beside this module) with uPlot's charts, all in one
file that needs nothing from the network.

What the page holds is either escaped or ours:
- every value goes through Jinja2's autoescape, and model-written text also has its control
  characters escaped (agent/common/escape.py), so `<img src=x onerror=...>` in a task is text;
- the charts' data sits in `<script type="application/json">` blocks (never run), written by
  Jinja2's `tojson`, which escapes `<`, `>`, `&` and `'`, and every character past ASCII
  (U+2028 among them), so no text can close the block;
- the scripts and styles are the package's own files (uPlot's, vendored under pages/uplot/, and
  report.js, report.css) and a rule per stop reason's colour, and the Content-Security-Policy
  lists each one's SHA-256: a script or style anyone managed to slip in anyway would not run, and
  `default-src 'none'` lets the page fetch nothing at all.

Jinja2 is imported here only, when a report is drawn: never on a cycle's path.
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
from pathlib import Path
from typing import Any

from agent.cli.history import cost_text, money
from agent.common.escape import escape_controls
from agent.common.times import age_text

PAGES = Path(__file__).with_name("pages")
UPLOT = PAGES / "uplot"

# One colour per stop reason (agent/common/outcomes.py StopReason, and history's own for cycles
# without a record); "?" for anything else. The legend, the timeline and the details use these.
COLOURS = {
    "done": "#2e7d32",
    "max_iterations": "#f9a825",
    "parse_errors": "#ef6c00",
    "token_budget": "#c0ca33",
    "time_budget": "#8d6e63",
    "repeated_action": "#8e24aa",
    "awaiting_approval": "#1e88e5",
    "stalled": "#6d4c41",
    "budget_exhausted": "#ad1457",
    "error": "#d32f2f",
    "idle": "#b0bec5",
    "held": "#546e7a",
    "consolidated": "#00897b",
    "consolidation_reverted": "#f06292",
    "killed": "#212121",
    "incomplete": "#757575",
    "running": "#26c6da",
    "?": "#9e9e9e",
}


# One colour per model on the per-day charts, in the order the page lists the models.
PALETTE = ("#1e88e5", "#43a047", "#fb8c00", "#8e24aa", "#00acc1", "#6d4c41", "#c0ca33", "#5e35b1")


def reason_class(reason: Any) -> str:
    """The CSS class suffix of a stop reason's colour: the reason when it is one we colour, else 'other'."""
    return reason if isinstance(reason, str) and reason in COLOURS and reason != "?" else "other"


def _amount(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else money(value)


def moment(epoch: Any) -> str:
    """A time for people: 'Sat 28 Nov 10:00 UTC' ('-' for none)."""
    if not isinstance(epoch, (int, float)):
        return "-"
    return _dt.datetime.fromtimestamp(epoch, _dt.timezone.utc).strftime("%a %d %b %H:%M UTC")


def clock(epoch: Any) -> str:
    """The time of day alone: '14:00'."""
    if not isinstance(epoch, (int, float)):
        return "-"
    return _dt.datetime.fromtimestamp(epoch, _dt.timezone.utc).strftime("%H:%M")


def span(seconds: Any) -> str:
    """A duration in its largest unit and the next ('3d 8h', '2h 5m', '11h', '40s')."""
    if not isinstance(seconds, (int, float)):
        return "-"
    seconds = max(0, int(seconds))
    units = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))
    k = next((k for k, (_, size) in enumerate(units) if seconds >= size), len(units) - 1)
    (big, size), parts = units[k], []
    parts.append(f"{seconds // size}{big}")
    if k + 1 < len(units):
        small, smaller = units[k + 1]
        if (seconds % size) // smaller:
            parts.append(f"{(seconds % size) // smaller}{small}")
    return " ".join(parts)


def priced(cost: Any, unpriced: int | bool, currency: str) -> str:
    """A cost with its currency ('0.0330 USD'), or what cost_text says when it could not be priced."""
    text = cost_text(cost, unpriced)
    return (
        text
        if text == "unpriced"
        else text.replace(" (+", f" {currency} (+", 1)
        if "(+" in text
        else f"{text} {currency}"
    )


def _diff_class(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "head"
    return {"@": "hunk", "+": "add", "-": "del"}.get(line[:1], "")


def _shown(text: Any) -> str:
    return escape_controls(text, keep_newlines=True)


def _hashed(kind: str, texts: list[str]) -> str:
    hashes = " ".join(
        f"'sha256-{base64.b64encode(hashlib.sha256(t.encode('utf-8')).digest()).decode()}'" for t in texts
    )
    return f"{kind} {hashes}"


def _environment():
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(PAGES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        age=age_text,
        cost=cost_text,
        amount=_amount,
        shown=_shown,
        diff_class=_diff_class,
        reason_class=reason_class,
        moment=moment,
        priced=priced,
        clock=clock,
        span=span,
    )
    return env


def colour_rules() -> str:
    rules = [f".r-{reason}{{background:{colour}}}" for reason, colour in COLOURS.items() if reason != "?"]
    models = [f".model-{n}{{background:{colour}}}" for n, colour in enumerate(PALETTE)]
    return "\n".join([*rules, f".r-other{{background:{COLOURS['?']}}}", *models])


def render(pages: list[dict], days: int, now: _dt.datetime, index: bool, headline: dict) -> str:
    """The whole page: an index of the homes first when `index`, then each home's part."""
    scripts = [(UPLOT / "uPlot.iife.min.js").read_text(encoding="utf-8"), (PAGES / "report.js").read_text("utf-8")]
    styles = [(UPLOT / "uPlot.min.css").read_text(encoding="utf-8"), (PAGES / "report.css").read_text("utf-8")]
    styles.append(colour_rules())
    csp = "; ".join(
        [
            "default-src 'none'",
            _hashed("script-src", scripts),
            _hashed("style-src", styles),
            "img-src data:",
            "base-uri 'none'",
            "form-action 'none'",
        ]
    )
    for page in pages:
        if "timeline" in page:
            page["chart"] = {k: page[k] for k in ("timeline", "spending", "budgets", "range", "totals", "currency")}
    homes = [page["health"]["home"] for page in pages]
    return (
        _environment()
        .get_template("report.html.j2")
        .render(
            pages=pages,
            index=index,
            headline=headline,
            days=days,
            title=homes[0] if len(homes) == 1 else f"{len(homes)} homes",
            generated=now.isoformat(timespec="seconds"),
            generated_text=now.strftime("%Y-%m-%d %H:%M"),
            colours=COLOURS,
            palette=PALETTE,
            scripts=scripts,
            styles=styles,
            csp=csp,
        )
    )
