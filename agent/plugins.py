"""Compatibility re-exports while importers move to agent.tools.plugins (the lead removes this)."""

from .tools.plugins import GROUP, any_plugin_installed, load_plugin_tools, tools_from, warn_once  # noqa: F401
