"""Outlets: whether the operator's tools were told, shown by `status` until they work again.

A hook that fails, or a metrics file that cannot be written, must not stay a line in one cycle
log: logs/outlets.json keeps, for `on_cycle_end` and `metrics_file`, the problem of the last
attempt that failed and the cycle it first failed in, and is rewritten (atomically, under the
home's lock) only when that changes: a first failure, another problem, or the first success after
a failure. So a home whose outlets work writes it never; `status` reads it and names each failing
outlet that is still configured.
"""

from __future__ import annotations

import json
from typing import Any

from agent.store.files import atomic_write
from agent.store.home import Home

OUTLETS = ("on_cycle_end", "metrics_file")
PROBLEM_CHARS = 500


def read_outlets(home: Home) -> dict[str, dict]:
    """{outlet: {"problem", "since"}} for each failing outlet; {} when none is or the file is
    missing or unreadable (it is derived: the next failure writes it again)."""
    try:
        data = json.loads(home.outlets.read_bytes())
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {name: entry for name, entry in data.items() if name in OUTLETS and _well_formed(entry)}


def _well_formed(entry: Any) -> bool:
    return isinstance(entry, dict) and all(isinstance(entry.get(key), str) for key in ("problem", "since"))


def note_outlet(home: Home, name: str, problem: str | None, cycle_id: str) -> None:
    """Keep how outlet `name` did in cycle `cycle_id` (`problem` None: it worked). Writes only on a
    change; a failure to write is left to the caller (aftercare logs it)."""
    failing = read_outlets(home)
    before = failing.get(name)
    if problem is None:
        if before is None:
            return
        failing.pop(name)
    else:
        problem = " ".join(problem.split())[:PROBLEM_CHARS]
        if before is not None and before["problem"] == problem:
            return  # the same failure as before: nothing to write
        failing[name] = {"problem": problem, "since": before["since"] if before else cycle_id}
    atomic_write(home.outlets, (json.dumps(failing, ensure_ascii=False, indent=1) + "\n").encode("utf-8"))


def failing_outlets(home: Home, configured: dict[str, bool]) -> dict[str, dict]:
    """The outlets `configured` (name -> set in config.yaml) whose last attempt failed."""
    return {name: entry for name, entry in read_outlets(home).items() if configured.get(name)}


def outlet_lines(failing: dict[str, dict]) -> list[str]:
    """`status`'s lines for the failing outlets."""
    shown = {"on_cycle_end": "hook:      on_cycle_end failing", "metrics_file": "metrics:   metrics_file not written"}
    return [f"{shown[name]} since cycle {entry['since']}: {entry['problem']}" for name, entry in failing.items()]
