"""Outlets: whether the operator's tools were told, shown by `status` until they work again.

A hook that fails, or a metrics file that cannot be written, must not stay a line in one cycle
log: the `outlet` table of logs/agent.db keeps, for `on_cycle_end`, `metrics_file` and `otel`, the problem
of the last attempt that failed and the cycle it first failed in, and is written only when that
changes: a first failure, another problem, or the first success after a failure (the row goes). So
a home whose outlets work writes nothing; `status` reads it and names each failing outlet that is
still configured.
"""

from __future__ import annotations

from agent.store.db import records
from agent.store.home import Home

OUTLETS = ("on_cycle_end", "metrics_file", "otel")
PROBLEM_CHARS = 500


def read_outlets(home: Home) -> dict[str, dict]:
    """{outlet: {"problem", "since"}} for each failing outlet; {} when none is."""
    rows = records(home, create=False).rows("SELECT name, problem, since FROM outlet ORDER BY name")
    return {name: {"problem": problem, "since": since} for name, problem, since in rows if name in OUTLETS}


def note_outlet(home: Home, name: str, problem: str | None, cycle_id: str) -> None:
    """Keep how outlet `name` did in cycle `cycle_id` (`problem` None: it worked). Writes only on a
    change; a failure to write is left to the caller (aftercare logs it)."""
    db = records(home)
    before = db.one("SELECT problem, since FROM outlet WHERE name = ?", (name,))
    if problem is None:
        if before is None:
            return
        with db.write():
            db.execute("DELETE FROM outlet WHERE name = ?", (name,))
        return
    problem = " ".join(problem.split())[:PROBLEM_CHARS]
    if before is not None and before[0] == problem:
        return  # the same failure as before: nothing to write
    with db.write():
        db.execute(
            "INSERT INTO outlet VALUES (?, 1, ?, ?) ON CONFLICT (name) DO UPDATE SET problem = excluded.problem",
            (name, problem, cycle_id),
        )


def failing_outlets(home: Home, configured: dict[str, bool]) -> dict[str, dict]:
    """The outlets `configured` (name -> set in config.yaml) whose last attempt failed."""
    return {name: entry for name, entry in read_outlets(home).items() if configured.get(name)}


def outlet_lines(failing: dict[str, dict]) -> list[str]:
    """`status`'s lines for the failing outlets."""
    shown = {
        "on_cycle_end": "hook:      on_cycle_end failing",
        "metrics_file": "metrics:   metrics_file not written",
        "otel": "traces:    otel export failing",
    }
    return [f"{shown[name]} since cycle {entry['since']}: {entry['problem']}" for name, entry in failing.items()]
