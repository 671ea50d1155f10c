"""Assembly: the tools one cycle offers, as config decides.

This sits above everything it assembles (the built-in tools, recall, plugins, MCP servers and
the control tools in base); nothing in agent.tools imports it except the package's __init__.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from agent.config import Settings
from agent.secrets import Secrets
from agent.tools.base import CONTROL_TOOLS, Registry, ToolContext, control_tools
from agent.tools.builtin import TOOLS
from agent.tools.plugins import load_plugin_tools, warn_once
from agent.tools.recall import TOOL as RECALL

if TYPE_CHECKING:
    from agent.tools.base import Tool
    from agent.tools.mcp import McpServers

# The start of the problem that names the tools the schema budget left out (doctor looks for it).
SCHEMAS_LEFT_OUT = "tools left out: their schemas would pass tool_schemas_max_bytes"


def schema_bytes(tool: "Tool") -> int:
    """What one tool adds to every request: its name, description and argument schema as JSON."""
    return len(json.dumps(tool.action_schema(), ensure_ascii=False).encode())


def within_schema_budget(
    tools: list["Tool"], budget: int, control: list["Tool"] | None = None
) -> tuple[list["Tool"], list[str]]:
    """(the tools whose schemas fit `budget` together, in order, the control tools (`control`,
    default: without sections) always; the names left out). A flood of MCP schemas never makes every
    request huge."""
    kept, left_out, used = [], [], sum(schema_bytes(t) for t in (control_tools() if control is None else control))
    for tool in tools:
        size = schema_bytes(tool)
        if used + size > budget:
            left_out.append(tool.name)
            continue
        kept.append(tool)
        used += size
    return kept, left_out


def build_registry(
    settings: Settings,
    *,
    entry_points: Any = None,
    warn: Callable[[str], None] | None = None,
    mcp: "McpServers | None" = None,
) -> Registry:
    """The tools one cycle offers: built-ins and recall, then plugins, then MCP tools, then the two
    control tools.

    Config decides: `tools_enabled` (when set) keeps only the tools it names, `tools_disabled`
    removes tools, `shell_policy: off` removes shell, `plugins_disabled` skips plugins. The
    control tools (update_scratchpad, done) are always offered. Plugins are imported here and
    only here, so commands that do not build a registry never import them; a broken plugin (or
    an MCP server that did not start) is reported through `warn` (default: once per process on
    stderr) and skipped. `mcp` holds the started MCP servers (see open_registry).
    """
    tools = [*TOOLS, RECALL]
    problems: list[str] = []
    if "*" not in settings.plugins_disabled:
        plugin_tools, problems = load_plugin_tools(
            reserved=[t.name for t in tools] + list(CONTROL_TOOLS),
            skip=settings.plugins_disabled,
            entry_points=entry_points,
        )
        tools += plugin_tools
    if mcp is not None:
        mcp_tools, mcp_problems = mcp.tools_for_registry(reserved=[t.name for t in tools] + list(CONTROL_TOOLS))
        tools += mcp_tools
        problems += mcp_problems
    for problem in problems:
        (warn or warn_once)(problem)
    wanted = set(settings.tools_enabled) if settings.tools_enabled is not None else None
    off = set(settings.tools_disabled)
    if settings.shell_policy == "off":
        off.add("shell")
    offered = [t for t in tools if t.name not in off and (wanted is None or t.name in wanted)]
    offered_names = {t.name for t in offered}
    disabled = [t.name for t in tools if t.name not in offered_names]
    control = control_tools(settings.section_specs)  # update_scratchpad takes the writable sections
    offered, left_out = within_schema_budget(offered, settings.tool_schemas_max_bytes, control)
    if left_out:
        problem = f"{SCHEMAS_LEFT_OUT} ({settings.tool_schemas_max_bytes}): {', '.join(left_out)}"
        problems.append(problem)
        (warn or warn_once)(problem)
    return Registry(offered + control, disabled, problems)


@contextlib.contextmanager
def open_registry(
    settings: Settings, home: Path, secrets: Secrets | None = None, *, given: Registry | None = None, **options: Any
) -> Iterator[Registry]:
    """build_registry, with the MCP servers config names running until the block ends, however it ends.

    Without `mcp_servers` nothing is started and the MCP SDK is never imported. A `given`
    registry (a caller's own, as tests pass to run_cycle) is used as it is.
    """
    if given is not None:
        yield given
        return
    if not settings.mcp_servers:
        yield build_registry(settings, **options)
        return
    from agent.tools.mcp import McpServers  # coarse laziness: asyncio and the SDK only when servers are configured

    with McpServers(ToolContext(home, settings, secrets)) as servers:
        registry = build_registry(settings, mcp=servers, **options)
        registry.later_problems = servers.noise_lines
        yield registry
