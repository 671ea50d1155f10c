"""Tool plugins: installed packages that add tools through the `agent.tools` entry-point group.

An entry point names a function, a `Tool`, or a list of them:

    [project.entry-points."agent.tools"]
    shout = "agent_shout:shout"          # a typed function with a docstring
    extras = "agent_extras:TOOLS"        # or a list of functions / Tools

Each becomes a `Tool` whose source is "plugin:<distribution name>". Plugins are found with
importlib.metadata and imported only when a registry is built (never at import time of the
agent package). A plugin that fails to import, or whose object cannot be turned into tools,
is reported (once per process, on stderr) and skipped; it never stops a cycle.
"""

from __future__ import annotations

import sys
from typing import Any, Iterable

from agent.common.entry_points import declared
from agent.common.plain import described
from agent.tools.base import Tool

# The entry-point group plugins declare. Spelled from the package name: it names a group, not a
# module, and import checkers that read module-like strings as imports should not see one.
GROUP = f"{__package__.split('.')[0]}.tools"

_reported: set[str] = set()


def warn_once(message: str) -> None:
    """Print a plugin problem on stderr, once per process (a cycle is one process)."""
    if message not in _reported:
        _reported.add(message)
        print(f"agent: warning: {message}", file=sys.stderr)


def _dist_name(entry_point: Any) -> str:
    dist = getattr(entry_point, "dist", None)
    name = getattr(dist, "name", None) if dist is not None else None
    return name or entry_point.value.split(":")[0].split(".")[0]


def tools_from(obj: Any, source: str) -> list[Tool]:
    """The tools an entry point's object describes, or TypeError saying why it cannot."""
    items = list(obj) if isinstance(obj, (list, tuple)) else [obj]
    if not items:
        raise TypeError("the entry point names an empty list")
    tools = []
    for item in items:
        if isinstance(item, Tool):
            if item.func is None:
                raise TypeError(f"Tool '{item.name}' has no function to run")
            tools.append(
                Tool(
                    item.name,
                    item.description,
                    item.args_schema,
                    item.func,
                    source,
                    item.example,
                    item.precheck,
                    item.side_effects,
                )
            )
        elif callable(item) and not isinstance(item, type):
            tools.append(Tool.from_function(item, source=source))
        else:
            got = "a class" if isinstance(item, type) else described(item)
            raise TypeError(f"the entry point must name a function, a Tool or a list of them, got {got}")
    return tools


def any_plugin_installed(paths: Iterable[str] | None = None) -> bool:
    """Whether some installed distribution declares an `agent.tools` entry point.

    Read from the entry_points.txt files on sys.path (agent/common/entry_points.py): importlib.metadata
    answers the same question, but importing it costs more than the rest of a cycle's start-up; it
    is imported only when this says yes."""
    return bool(declared(GROUP, paths))


def _plugin_tools(entry_point: Any, source: str) -> tuple[list[Tool], str]:
    """(the tools an entry point names, "") or ([], why it cannot be used): third-party code that
    fails is named with its exception, as its author finds it; what it names but is no tool is said
    in words (tools_from's TypeError), never with a Python type name."""
    try:
        obj = entry_point.load()
    except (Exception, SystemExit) as exc:  # any failure of third-party code: skip the plugin
        return [], f"{type(exc).__name__}: {exc}"
    try:
        return tools_from(obj, source), ""
    except TypeError as exc:
        return [], str(exc)
    except Exception as exc:  # reading the object failed (a signature Python cannot give)
        return [], f"{type(exc).__name__}: {exc}"


def load_plugin_tools(
    reserved: Iterable[str] = (), skip: Iterable[str] = (), entry_points: Iterable[Any] | None = None
) -> tuple[list[Tool], list[str]]:
    """(tools from every installed plugin, problems): broken plugins are left out, not raised.

    `reserved` are names already taken (built-ins, control tools): a plugin tool reusing one
    is skipped. `skip` lists distribution names (or entry-point names) not to load at all.
    """
    if entry_points is None:
        if not any_plugin_installed():
            return [], []
        from importlib import metadata  # lazily: see any_plugin_installed

        entry_points = metadata.entry_points(group=GROUP)
    skip = set(skip)
    taken = set(reserved)
    seen: set[tuple[str, str]] = set()
    tools: list[Tool] = []
    problems: list[str] = []
    # Sorted so the prompt (and the provider's prompt cache) does not depend on install order.
    for entry_point in sorted(entry_points, key=lambda ep: (_dist_name(ep), ep.name)):
        dist = _dist_name(entry_point)
        if (dist, entry_point.name) in seen or dist in skip or entry_point.name in skip:
            continue
        seen.add((dist, entry_point.name))
        where = f"plugin {dist} (entry point '{entry_point.name} = {entry_point.value}')"
        found, problem = _plugin_tools(entry_point, f"plugin:{dist}")
        if problem:
            problems.append(f"{where} skipped: {problem}")
            continue
        for tool in found:
            if tool.name in taken:
                problems.append(f"{where}: tool '{tool.name}' skipped: a tool with that name already exists")
                continue
            taken.add(tool.name)
            tools.append(tool)
    return tools, problems
