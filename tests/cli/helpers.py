"""Helpers for the command tests: scripted cycles in a real home, and their ids."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import run_cli, write_script

ANSI = "\x1b["


def echo(message: str) -> dict:
    return {"tool": "echo", "args": {"message": message}}


def done(summary: str) -> dict:
    return {"tool": "done", "args": {"summary": summary}}


def run_cycle(home: Path, replies: list, *extra: str):
    """`agent run` in `home` with a scripted model that sends `replies`."""
    script = write_script(home.parent, replies, name=f"script_{len(list(home.parent.glob('script_*')))}.yaml")
    return run_cli("run", "--home", str(home), "--model", f"scripted:{script}", *extra)


def cycle_ids(home: Path) -> list[str]:
    """The ids of the cycles whose before snapshot is on disk, oldest first."""
    return sorted(p.name[: -len("_before.yaml")] for p in (home / "scratchpad").glob("*_before.yaml"))


def json_out(result):
    """A successful command's stdout, parsed as JSON."""
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


DONE_REPLIES = [done("ok")]
