"""Homes with sections for the tests that run real cycles: the config, and ways to read what a
cycle left (the state, the archive's section records, the notes)."""

from __future__ import annotations

from pathlib import Path

import yaml

from agent.store.archive import archived
from agent.store.home import Home
from tests.helpers import read_active

# A small recursive-like memory: the shapes every rule needs.
SECTIONS = {
    "purpose": {"kind": "text", "limit": 200, "read_only": True, "description": "What this agent is for."},
    "now": {"kind": "text", "limit": 120, "description": "What I am doing."},
    "known": {"kind": "list", "limit": 4, "entry_chars": 60, "description": "Facts I am sure of."},
    "unknown": {"kind": "list", "limit": 2, "entry_chars": 60, "when_full": "refuse"},
    "tell": {"kind": "list", "limit": 3, "surface": True, "description": "What a person should know."},
}


def with_sections(home: Path, state: dict | None = None, sections: dict | None = None, **settings) -> Path:
    """`home` with config.yaml defining `sections` (default SECTIONS) and `settings`, and `state`
    as active.yaml when given."""
    home.mkdir(parents=True, exist_ok=True)
    config = {"sections": SECTIONS if sections is None else sections, **settings}
    (home / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    if state is not None:
        path = home / "scratchpad" / "active.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(state, sort_keys=False))
    return home


def update(**args) -> dict:
    return {"tool": "update_scratchpad", "args": args}


def archived_sections(home: Path) -> list[dict]:
    """The archive's section records (entries and texts), oldest first."""
    return [r for r in archived(Home.at(home)) if r.get("kind") in ("section_entry", "section_text")]


def newest_transcript(home: Path) -> list[dict]:
    """The transcript records of the home's newest cycle that has one, in order."""
    from agent.store.db import records
    from tests.helpers import transcript

    (newest,) = records(Home.at(home)).one("SELECT max(cycle_id) FROM transcript")
    return transcript(home, newest)


def texts(home: Path, section: str) -> list[str]:
    """The texts of a list section's entries in active.yaml."""
    return [entry["text"] for entry in read_active(home)[section]]


def notes(home: Path) -> list[str]:
    return read_active(home)["notes"].splitlines()


def entry(entry_id: str, text: str, days: int = 1, by: str = "model", last_day: str = "2026-01-16") -> dict:
    """A list entry as the runtime writes it."""
    return {"id": entry_id, "text": text, "by": by, "added": "20260116_101500_01", "days": days, "last_day": last_day}


def known(*texts: str, days: int = 1) -> list[dict]:
    """Model entries known-1, known-2, ... with `texts`."""
    return [entry(f"known-{n}", text, days) for n, text in enumerate(texts, 1)]
