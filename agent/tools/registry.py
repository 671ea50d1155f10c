"""Assembly: the tools one cycle offers, as config decides.

This sits above everything it assembles (the built-in tools, plugins and the control tools in
base); nothing in agent.tools imports it except the package's __init__.
"""

from __future__ import annotations

from typing import Any, Callable

from ..config import Settings
from .base import CONTROL_TOOLS, Registry, control_tools
from .builtin import TOOLS
from .plugins import load_plugin_tools, warn_once


def build_registry(settings: Settings, *, entry_points: Any = None,
                   warn: Callable[[str], None] | None = None) -> Registry:
    """The tools one cycle offers: built-ins, then plugins, then the two control tools.

    Config decides: `tools_enabled` (when set) keeps only the tools it names, `tools_disabled`
    removes tools, `shell_policy: off` removes shell, `plugins_disabled` skips plugins. The
    control tools (update_scratchpad, done) are always offered. Plugins are imported here and
    only here, so commands that do not build a registry never import them; a broken plugin is
    reported through `warn` (default: once per process on stderr) and skipped.
    """
    tools = list(TOOLS)
    problems: list[str] = []
    if "*" not in settings.plugins_disabled:
        plugin_tools, problems = load_plugin_tools(
            reserved=[t.name for t in tools] + list(CONTROL_TOOLS), skip=settings.plugins_disabled,
            entry_points=entry_points)
        tools += plugin_tools
    for problem in problems:
        (warn or warn_once)(problem)
    wanted = set(settings.tools_enabled) if settings.tools_enabled is not None else None
    off = set(settings.tools_disabled)
    if settings.shell_policy == "off":
        off.add("shell")
    offered = [t for t in tools if t.name not in off and (wanted is None or t.name in wanted)]
    offered_names = {t.name for t in offered}
    disabled = [t.name for t in tools if t.name not in offered_names]
    return Registry(offered + control_tools(), disabled, problems)
