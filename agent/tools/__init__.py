"""Tools the model may call, by responsibility.

- base.py: Tool (one typed function, described once), ToolContext, ToolError, Registry, and
  the dispatcher's control tools (update_scratchpad, done). Imports no tool implementation.
- shell.py, files.py, http.py: the built-in tools, each with its own safety checks;
  builtin.py lists them in prompt order (with echo).
- plugins.py: tools from installed packages (the `agent.tools` entry-point group).
- registry.py: build_registry, the assembly above all of them, filtered by config.
"""

from .base import CONTROL_TOOLS, TOOL_NAME, Registry, Tool, ToolContext, ToolError, control_tools
from .registry import build_registry

__all__ = ["CONTROL_TOOLS", "TOOL_NAME", "Registry", "Tool", "ToolContext", "ToolError", "build_registry",
           "control_tools"]
