"""A lived-in home: real cycles of the kinds a home meets (done with tool calls, stopped by a limit,
failed on a dead endpoint, idle), by the real runner, for the tests that read its records as a
person would (sqlite3, datasette)."""

from __future__ import annotations

import socket
from pathlib import Path

import yaml

from tests.helpers import run_cli, write_active, write_script

TASK = {
    "goals": ["keep the workspace tidy"],
    "current_task": "write the report",
    "pending_actions": ["tidy up"],
    "completed_tasks": [],
    "notes": "",
    "last_updated": None,
}
WROTE = {"tool": "write_file", "args": {"path": "report.md", "content": "all well"}}
DONE = {"tool": "done", "args": {"summary": "wrote it"}}


def closed_port_url() -> str:
    """An endpoint on loopback where nothing listens: the connection is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


def previous_release_home(folder: Path, monkeypatch) -> Path:
    """A lived-in home whose database the previous release wrote: the migrations before the one
    that added the cycle table's columns (found by name: numbers change as others are appended)."""
    from agent.store import migrations
    from agent.store.db import close_all

    with monkeypatch.context() as patched:
        patched.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:COLUMNS_MIGRATION])
        home = lived_in_home(folder)
        close_all()
    return home


def _columns_migration() -> int:
    from agent.store import migrations

    return next(n for n, step in enumerate(migrations.MIGRATIONS) if step.__name__.endswith("_cycle_columns"))


COLUMNS_MIGRATION = _columns_migration()


def lived_in_home(folder: Path) -> Path:
    """A home with four cycles: done (a tool call, then done), max_iterations, error (a refused
    connection), idle (nothing to do); returns it."""
    home = folder / "lived-in"
    (home / "scratchpad").mkdir(parents=True)
    (home / "config.yaml").write_text(yaml.safe_dump({"max_iterations": 2, "max_retries": 0}))
    write_active(home, TASK)
    done = write_script(folder, [WROTE, DONE], "done.yaml")
    looping = write_script(folder, [WROTE, {**WROTE, "args": {**WROTE["args"], "path": "b.md"}}], "loop.yaml")
    for script in (done, looping):
        result = run_cli("run", "--home", str(home), "--model", f"scripted:{script}", "-q")
        assert result.exit_code in (0, 3), result.output
    failed = run_cli(
        "run", "--home", str(home), "--model", "openai:test-model", "-q", env={"OPENAI_BASE_URL": closed_port_url()}
    )
    assert failed.exit_code == 4, failed.output
    write_active(home, {**TASK, "current_task": None, "pending_actions": []})
    idle = run_cli("run", "--home", str(home), "--model", f"scripted:{done}", "-q", env={"AGENT_IDLE": "skip"})
    assert idle.exit_code == 0, idle.output
    return home
