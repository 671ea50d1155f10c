"""What a fork, or the scratch copy a replay runs in, leaves out of config.yaml: the settings that
act beyond the home, so a copy never fires the original home's alerts, replaces its metrics file,
consumes the events its `wake_when` watches or repeats what its MCP servers' tools did.
"""

from __future__ import annotations

from pathlib import Path

from agent.common.outcomes import UsageError
from agent.common.safe_yaml import dump_yaml
from agent.config import config_values

# Settings that reach past a home: its hook, its metrics file (often an absolute path that
# node_exporter reads), the command that decides when it wakes (a recipe may consume what woke
# it), and MCP servers, whose tools act on the world.
SIDE_EFFECT_SETTINGS = ("on_cycle_end", "metrics_file", "wake_when", "mcp_servers")


def without_settings(text: str | None, path: Path, names: tuple[str, ...], by: str) -> tuple[str | None, list[str]]:
    """config.yaml's `text` (read from `path`) with the top-level settings `names` left out, and
    which of them it held. Each is cut from the text with a comment in its place saying who left it
    out (`by`), so the operator's other lines and comments stay as written; when the cut text
    would not load as exactly the other settings (a flow-style mapping, an anchor), those are
    written anew instead. A config that does not load is a UsageError (exit 2) naming `path`."""
    if text is None:
        return None, []
    values = config_values(text, path)
    dropped = [name for name in names if values.get(name) is not None]
    if not dropped:
        return text, []
    why = f"left out by {by}: it acts beyond this home, on the original's"
    kept = {key: value for key, value in values.items() if key not in dropped}
    cut = _cut_blocks(text, dropped, why)
    try:
        if config_values(cut, path) == kept:
            return cut, dropped
    except UsageError:
        pass
    return f"# Written by {by}: {', '.join(dropped)} {why}\n" + (dump_yaml(kept) if kept else ""), dropped


def _cut_blocks(text: str, names: list[str], why: str) -> str:
    """`text` with each top-level `NAME:` line and the lines that continue it (indented, blank, or a
    `- item` of a block list) replaced by one comment."""
    out, cutting = [], False
    for line in text.splitlines(keepends=True):
        key = line.split(":", 1)[0].strip().strip("'\"") if ":" in line and not line[:1].isspace() else None
        if key in names:
            out.append(f"# {key}: {why}\n")
            cutting = True
            continue
        if cutting and (not line.strip() or line[:1].isspace() or line.startswith(("- ", "-\n"))):
            continue
        cutting = False
        out.append(line)
    return "".join(out)
