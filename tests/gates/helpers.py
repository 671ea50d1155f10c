"""Gates made by hand, for the tests of one gate's hooks."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

from agent.config import Settings
from agent.gates.base import Gate, GateContext
from agent.models.scripted import ScriptedModel
from agent.secrets import Secrets
from agent.store.home import Home

CYCLE_ID = "20240105T120000Z"
NOW = _dt.datetime(2024, 1, 5, 12, 0, tzinfo=_dt.timezone.utc)


def context(home: Path, settings: Settings, model=None, secrets: Secrets | None = None) -> GateContext:
    """What a cycle of `home` at NOW, with `settings`, tells its gates."""
    model = model or ScriptedModel.from_replies([])
    return GateContext(Home.at(home), settings, secrets or Secrets.from_settings(settings), model, CYCLE_ID, NOW)


def made(gate: type[Gate], home: Path, settings: Settings, **given) -> Gate:
    """`gate` as a cycle of `home` would open it."""
    return gate(context(home, settings, **given))
