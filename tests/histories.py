"""Long histories made fast, for `agent report` and `agent fleet` (their tests and bench/report.py).

Thousands of cycle records are written through the store's own writer (the rows a cycle's aftercare
writes to logs/agent.db, in one transaction), ending a little before now; then a few real cycles run (the runner, the scripted model, a
clock of our own), so the newest cycles have what a real one leaves: snapshots, a transcript, a
log, journal calls. The fabricated records cycle through every stop reason, several models (one
of them without a price), and hold one incident: a run of failing cycles on one task with one
error (its numbers differing), which a done cycle then clears.
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path

import yaml

from agent.common.cycle_ids import following_cycle_id
from agent.common.outcomes import StopReason
from agent.config import load_settings
from agent.cycle.run import run_cycle
from agent.gates.budgets import cycle_cost
from agent.models import ScriptedModel
from agent.store.db import records as database
from agent.store.home import Home
from agent.store.rows import insert_record

MODELS = ("openai:gpt-4o-mini", "openai:gpt-4o", "openai:local-llama")  # the last has no price
PRICES = {"openai:gpt-4o-mini": {"input": 0.15, "output": 0.6}, "openai:gpt-4o": {"input": 2.5, "output": 10.0}}
HOSTILE_TASK = '<img src=x onerror="window.__pwned=1;alert(1)">'
HOSTILE_ERROR = "</script><script>window.__pwned=2;alert(2)</script>\u2028after a line separator <b>bold?</b>"
INCIDENT_TASK = "rotate the backup keys"
INCIDENT_LENGTH = 6
CONFIG = {
    "prices": PRICES,
    "daily_cost_budget": 0.5,
    "daily_token_budget": 400_000,
    "monthly_cost_budget": 40.0,
    "keep_cycles": None,
    "stale_after": 24,
}
# What the fabricated cycles end with, in turn: every stop reason, done and idle the most often.
# A held cycle follows the stalled one it holds after, as a gate holds it at wake.
_REST = [r.value for r in StopReason if r not in (StopReason.DONE, StopReason.IDLE, StopReason.HELD)]
PATTERN = [
    *([StopReason.DONE.value] * 5),
    *([StopReason.IDLE.value] * 4),
    *_REST[: _REST.index(StopReason.STALLED.value) + 1],
    StopReason.HELD.value,
    *_REST[_REST.index(StopReason.STALLED.value) + 1 :],
]
NO_MODEL = (StopReason.IDLE.value, StopReason.HELD.value)  # cycles that asked no model
HELD_FOR = StopReason.STALLED


def _record(cycle_id: str, moment: _dt.datetime, n: int, reason: str, task: str, error: str | None) -> dict:
    idle = reason in NO_MODEL
    held = reason == StopReason.HELD.value
    model = MODELS[n % len(MODELS)]
    usage = {
        "prompt_tokens": 0 if idle else 900 + (n % 7) * 150,
        "completion_tokens": 0 if idle else 60 + (n % 5) * 20,
        "cached_tokens": 0,
        "total_tokens": 0,
        "calls": 0 if idle else 1 + n % 4,
    }
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    return {
        "cycle_id": cycle_id,
        "started": moment.isoformat(timespec="seconds"),
        "duration_s": 0.0 if idle else 2.5 + n % 9,
        "model": model,
        "stop_reason": reason,
        "exit_code": int(HELD_FOR.exit_code if held else StopReason(reason).exit_code),
        "iterations": 0 if idle else 1 + n % 6,
        "task_before": task if held else None if idle else task,
        "task_after": task if held else None if idle or reason == StopReason.DONE.value else task,
        "usage": usage,
        "error": error,
        "archived": 0,
        "reflect": None,
        "actions": {} if idle else {"tool": 1, "done": 1},
        "cost": None if idle else cycle_cost(PRICES, model, usage),
        "idle": "held: stalled, and nothing changed since" if held else "no task" if idle else None,
        "held_for": HELD_FOR.value if held else None,
        "calls": [],
        "pending_approvals": 0,
        "oldest_pending_approval": None,
    }


def fabricated(
    count: int,
    end: _dt.datetime,
    every: _dt.timedelta,
    incident_at: int | None = None,
    pattern: list[str] = PATTERN,
) -> list[dict]:
    """`count` cycle records, `every` apart, the newest at `end`, oldest first, ending as `pattern`
    says in turn. From `incident_at` (counted from the newest), INCIDENT_LENGTH failing cycles on
    one task, then the pattern again."""
    records, ids = [], []
    start = end - every * (count - 1)
    incident = range(count - incident_at, count - incident_at + INCIDENT_LENGTH) if incident_at else range(0)
    for n in range(count):
        moment = start + every * n
        cycle_id = following_cycle_id(moment, ids[-1:])
        ids.append(cycle_id)
        if n in incident:
            reason, task, error = "error", INCIDENT_TASK, f"model unreachable: connection refused after {n}.5 s"
        else:
            reason = pattern[n % len(pattern)]
            task = HOSTILE_TASK if n % 97 == 0 else f"task {n // 12}: look at the logs and note what changed"
            error = HOSTILE_ERROR if reason == "error" else None
        records.append(_record(cycle_id, moment, n, reason, task, error))
    return records


def write_history(home: Home, records: list[dict]) -> None:
    """`records` as the rows of the home's records database, through the store's writer (what a
    cycle's aftercare writes, with no files on disk), in one transaction."""
    home.ensure_dirs()
    db = database(home)
    with db.write():
        for record in records:
            insert_record(db, record)


SCRIPT = [
    {"tool": "write_file", "args": {"path": "out.txt", "content": f"a result {HOSTILE_TASK}"}},
    {"tool": "update_scratchpad", "args": {"notes": f"APPEND: saw {HOSTILE_ERROR}"}},
    {"tool": "done", "args": {"summary": "finished"}},
]


def real_cycles(home: Home, script: Path, moments: list[_dt.datetime]) -> list:
    """One real cycle at each moment, on the scripted model: a file written, a note, done."""
    settings = load_settings(home.root, env={})
    return [run_cycle(home, settings, ScriptedModel(script), clock=lambda m=moment: m) for moment in moments]


def long_home(
    root: Path,
    count: int,
    end: _dt.datetime,
    every: _dt.timedelta,
    real: int = 3,
    incident_at: int | None = 200,
    pattern: list[str] = PATTERN,
    **settings,
) -> Home:
    """A home of `count` fabricated cycles ending at `end`, then `real` real cycles `every` apart after
    them (the newest at `end + every * real`), tasks queued for them (the first the hostile one);
    `settings` go into its config.yaml with CONFIG's."""
    root.mkdir(parents=True)
    (root / "scratchpad").mkdir()
    script = root.parent / f"{root.name}-script.yaml"
    script.write_text(yaml.safe_dump([json.dumps(r) for r in SCRIPT]))
    prices = dict(PRICES, **{f"scripted:{script}": {"input": 1.0, "output": 2.0}})
    (root / "config.yaml").write_text(yaml.safe_dump(dict(CONFIG, prices=prices, **settings)))
    tasks = [HOSTILE_TASK, *(f"real task {n}" for n in range(real + 2))]
    (root / "scratchpad" / "active.yaml").write_text(
        yaml.safe_dump({"goals": ["keep the service healthy"], "current_task": tasks[0], "pending_actions": tasks[1:]})
    )
    home = Home.at(root)
    write_history(home, fabricated(count, end, every, incident_at, pattern))
    real_cycles(home, script, [end + every * (n + 1) for n in range(real)])
    return home
