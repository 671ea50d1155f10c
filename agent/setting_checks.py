"""Checks of settings whose values have more structure than a type says: prices and MCP servers.

A leaf under config.py: it knows the shapes, config.py knows the settings.
"""

from __future__ import annotations

import math
import re

from .outcomes import UsageError

# One MCP server in config.yaml (mcp_servers: {name: this}).
MCP_SERVER_SCHEMA = {
    "type": "object",
    "properties": {
        "command": {"type": "string"},
        "args": {"type": "array", "items": {"type": "string"}},
        "env": {"type": "object", "additionalProperties": {"type": "string"}},
        "tools_enabled": {"type": ["array", "null"], "items": {"type": "string"}},
    },
    "required": ["command"],
    "additionalProperties": False,
}
MCP_SERVER_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,31}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


PRICE_KEYS = ("input", "output")


def check_prices(prices: dict[str, dict[str, float]]) -> None:
    """Each model's price: exactly `input` and `output`, each a number of 0 or more (per million tokens)."""
    for model, price in prices.items():
        if set(price) != set(PRICE_KEYS):
            raise UsageError(f"setting 'prices.{model}' must have exactly the keys input and output "
                             f"(price per million tokens), got {', '.join(map(str, price)) or 'none'}")
        for key in PRICE_KEYS:
            if not math.isfinite(price[key]) or price[key] < 0:
                raise UsageError(f"setting 'prices.{model}.{key}' must be a number of 0 or more, got {price[key]!r}")


def check_mcp_server(name: str, server: dict) -> None:
    """What MCP_SERVER_SCHEMA cannot say about one server: its name, an empty command, NUL bytes."""
    key = f"mcp_servers.{name}"
    if not MCP_SERVER_NAME.fullmatch(name):
        raise UsageError(f"setting 'mcp_servers': server name {name!r} must be up to 32 letters, digits, '_' or '-', "
                         f"starting with a letter (it prefixes its tools' names)")
    if not server["command"].strip():
        raise UsageError(f"setting '{key}.command' is empty; name the program that starts the server")
    for variable in server.get("env", {}):
        if not _ENV_NAME.fullmatch(variable):
            raise UsageError(f"setting '{key}.env': {variable!r} is not an environment variable name")
    texts = [server["command"], *server.get("args", []), *server.get("env", {}).values()]
    if any("\0" in text for text in texts):
        raise UsageError(f"setting '{key}' holds a NUL byte, which no command or environment can carry")
