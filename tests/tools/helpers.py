"""Helpers for the tool tests: a context for a home, and one dispatched call."""

from __future__ import annotations

import json
from pathlib import Path

from agent.common.tags import Tag
from agent.config import Settings
from agent.cycle.dispatch import dispatch
from agent.state import fresh_state
from agent.tools import Registry, ToolContext, build_registry


def ctx_for(home: Path, **settings) -> ToolContext:
    """A context for `home`; the shell policy is the allowlist unless a test names another (the
    sandbox's tests are in test_sandbox.py and tests/system/test_sandbox.py)."""
    settings.setdefault("shell_policy", "allowlist")
    return ToolContext(home, Settings(**settings))


def call(ctx: ToolContext, tool: str, registry: Registry | None = None, **args) -> tuple[Tag, str]:
    """Dispatch one call to `tool` and return (outcome kind, note)."""
    registry = registry or build_registry(ctx.settings, entry_points=[])
    _, outcome = dispatch(fresh_state(), json.dumps({"tool": tool, "args": args}), registry, ctx)
    return outcome.kind, outcome.note
