"""Tools the model may call, by responsibility.

- base.py: Tool (one typed function, described once), ToolContext, ToolError, Registry, and
  the dispatcher's control tools (update_scratchpad, done). Imports no tool implementation.
- shell.py, files.py, http.py: the built-in tools, each with its own safety checks;
  builtin.py lists them in prompt order (with echo). http_decoding.py bounds a body's decoding;
  shell_policy.py is the allowlist's argument policy; workspace.py the one folder they reach.
- recall.py: the recall tool (search what left memory, in the archive; the index is in agent/store/).
- plugins.py: tools from installed packages (the `agent.tools` entry-point group).
- mcp.py, mcp_convert.py: tools from MCP servers (config's `mcp_servers`), started per cycle.
- sandbox.py (+ sandbox_limits.py, sandbox_identity.py, sandbox_seccomp.py, quota.py): where the
  shell's commands and acceptance checks run, as whom, under which seccomp filter and quota, and
  which shell policy is in force (`policy_line`).
- origins.py: where each tool result the model read came from (a workspace file, its own writing
  or not, an http host, an MCP server, the operator's task), kept as the dispatcher runs each tool.
- children.py: commands the tools start never outlive the agent, and their output is bounded.
- registry.py: build_registry and open_registry, the assembly above all of them, filtered by config.
"""

from agent.tools.base import (
    CONTROL_TOOLS,
    TOOL_NAME,
    NeedsApproval,
    NotACall,
    Registry,
    Tool,
    ToolContext,
    ToolError,
    control_tools,
)
from agent.tools.registry import build_registry, open_registry
from agent.tools.sandbox import policy_line

__all__ = [
    "CONTROL_TOOLS",
    "TOOL_NAME",
    "NeedsApproval",
    "NotACall",
    "Registry",
    "Tool",
    "ToolContext",
    "ToolError",
    "build_registry",
    "control_tools",
    "open_registry",
    "policy_line",
]
