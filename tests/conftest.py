"""Shared fixtures: real homes in temporary folders, and a clean environment for every test."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An empty home folder (the runner creates scratchpad/ and logs/ itself)."""
    root = tmp_path / "home"
    root.mkdir()
    return root


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never see the developer's model settings or keys."""
    for var in ("AGENT_HOME", "AGENT_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    # Most tests are about what a cycle does once it runs, often from an empty state: they run every
    # cycle (idle: run, inherited by the agent processes they start). tests/test_idle.py, about when
    # a cycle calls no model, unsets it.
    monkeypatch.setenv("AGENT_IDLE", "run")
