"""Prompt assembly. The system message (rules + tool list) is byte-identical across iterations and
cycles, so providers' prompt caches hit; everything that changes goes in the user message, last.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from .scratchpad import dump_yaml
from .tools import Registry

TOOLS_MARKER = "{{tools}}"


def default_rules() -> str:
    return resources.files("agent").joinpath("templates/rules.md").read_text(encoding="utf-8")


def read_rules(path: Path) -> str:
    """The home's rules.md, or the packaged default when the home has none."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return default_rules()


def system_prompt(rules: str, registry: Registry) -> str:
    listing = registry.prompt_listing()
    if TOOLS_MARKER in rules:
        return rules.replace(TOOLS_MARKER, listing)
    return f"{rules.rstrip()}\n\n## Tools\n\n{listing}\n"


def user_prompt(state: dict, iteration: int, max_iterations: int, warnings: list[str] | None = None) -> str:
    """The changing part: the scratchpad as YAML, then where this iteration stands."""
    lines = ["## Scratchpad", "", "```yaml", dump_yaml(state).rstrip(), "```", "", "## Now", ""]
    if state.get("current_task"):
        lines.append(f"Current task: {state['current_task']}")
    elif state.get("pending_actions"):
        lines.append("No current task. Call done to start the first pending action.")
    else:
        lines.append("No current task and nothing pending: call done with a short summary.")
    lines.append(f"Iteration {iteration} of {max_iterations}.")
    if iteration == max_iterations:
        lines.append("This is the LAST iteration: call done now with a summary of what was done.")
    lines.extend(warnings or [])
    lines.append("Reply with one JSON action.")
    return "\n".join(lines) + "\n"
