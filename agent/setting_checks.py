"""Checks of settings: the one checker of a field's own constraints, and the shapes of prices, MCP servers,
the fallback models and their budgets.

A leaf under config.py: it knows the checks, config.py knows the settings (each field carries its constraints).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from agent.common.outcomes import UsageError

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


# Seconds settings: past a day they are a typo, and 1e10 overflows the timers that use them.
MOST_SECONDS = 86400.0
# Any whole number past this is a typo, and larger ones overflow the C sizes (read lengths, contexts) they become.
MOST_INTEGER = 2**53


def check_constraints(name: str, value: object, rules: Mapping[str, Any]) -> None:
    """Raise UsageError when `value` breaks the constraints its field carries (the keywords of config._doc).

    choices: the allowed values; minimum: the least allowed value; above: a bound the value must exceed;
    maximum: the most allowed; unit: named in messages, and "seconds" caps the value at MOST_SECONDS (a day).
    None (an unset optional setting) passes; whatever the constraints, a float must be finite and an integer at most
    MOST_INTEGER.
    """
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise UsageError(f"setting '{name}' must be a finite number, got {value!r}")
    choices = rules.get("choices")
    if choices is not None and value not in choices:
        raise UsageError(f"setting '{name}' must be one of {', '.join(choices)}, got {value!r}")
    if isinstance(value, (int, float)):
        _check_bounds(name, value, rules)


def _check_bounds(name: str, value: float, rules: Mapping[str, Any]) -> None:
    """The numeric constraints: between minimum and maximum, above, minimum, then the ceiling."""
    unit, minimum, above, maximum = rules.get("unit"), rules.get("minimum"), rules.get("above"), rules.get("maximum")
    units = f" {unit}" if unit else ""
    if minimum is not None and maximum is not None and not minimum <= value <= maximum:
        raise UsageError(
            f"setting '{name}' must be between {_shown(minimum)} and {_shown(maximum)}{units}, got {value!r}"
        )
    if above is not None and value <= above:
        raise UsageError(f"setting '{name}' must be greater than {_shown(above)}, got {value!r}")
    if minimum is not None and value < minimum:
        least = "0 or more" if minimum == 0 else f"at least {_shown(minimum)}{units}"
        raise UsageError(f"setting '{name}' must be {least}, got {value!r}")
    ceiling, units = _ceiling(value, unit, maximum, units)
    if ceiling is not None and value > ceiling:
        raise UsageError(f"setting '{name}' must be at most {_shown(ceiling)}{units}, got {value!r}")


def _ceiling(value: float, unit: str | None, maximum: float | None, units: str) -> tuple[float | None, str]:
    """(the most `value` may be, the units to name): its own maximum; else a day for seconds; else
    MOST_INTEGER for a whole number; else none."""
    if maximum is not None:
        return maximum, units
    if unit == "seconds":
        return MOST_SECONDS, " seconds (a day)"
    if isinstance(value, int):
        return MOST_INTEGER, units
    return None, units


def _shown(number: float) -> str:
    return f"{number:g}" if isinstance(number, float) else str(number)


PRICE_KEYS = ("input", "output")


def check_prices(prices: dict[str, dict[str, float]]) -> None:
    """Each model's price: exactly `input` and `output`, each a number of 0 or more (per million tokens)."""
    for model, price in prices.items():
        if set(price) != set(PRICE_KEYS):
            raise UsageError(
                f"setting 'prices.{model}' must have exactly the keys input and output "
                f"(price per million tokens), got {', '.join(map(str, price)) or 'none'}"
            )
        for key in PRICE_KEYS:
            if not math.isfinite(price[key]) or price[key] < 0:
                raise UsageError(f"setting 'prices.{model}.{key}' must be a number of 0 or more, got {price[key]!r}")


def check_mcp_server(name: str, server: dict) -> None:
    """What MCP_SERVER_SCHEMA cannot say about one server: its name, an empty command, NUL bytes."""
    key = f"mcp_servers.{name}"
    if not MCP_SERVER_NAME.fullmatch(name):
        raise UsageError(
            f"setting 'mcp_servers': server name {name!r} must be up to 32 letters, digits, '_' or '-', "
            f"starting with a letter (it prefixes its tools' names)"
        )
    if not server["command"].strip():
        raise UsageError(f"setting '{key}.command' is empty; name the program that starts the server")
    for variable in server.get("env", {}):
        if not _ENV_NAME.fullmatch(variable):
            raise UsageError(f"setting '{key}.env': {variable!r} is not an environment variable name")
    texts = [server["command"], *server.get("args", []), *server.get("env", {}).values()]
    if any("\0" in text for text in texts):
        raise UsageError(f"setting '{key}' holds a NUL byte, which no command or environment can carry")


# fallback_models: a model name, or a mapping with its own endpoint and key variable.
FALLBACK_MODELS_SCHEMA = {
    "type": "array",
    "items": {
        "anyOf": [
            {"type": "string"},
            {
                "type": "object",
                "required": ["model"],
                "additionalProperties": False,
                "properties": {k: {"type": "string"} for k in ("model", "base_url", "api_key_env")},
            },
        ]
    },
}
MODEL_BUDGET_KEYS = ("daily_tokens", "monthly_tokens", "daily_cost", "monthly_cost")
MODEL_BUDGETS_SCHEMA = {
    "type": "object",
    "additionalProperties": {
        "type": "object",
        "additionalProperties": False,
        "properties": {k: {"type": "number"} for k in MODEL_BUDGET_KEYS},
    },
}


def check_model_settings(fallback_models: list, model_budgets: dict) -> None:
    """Each fallback entry names a model; each model budget is a number above 0."""
    for n, entry in enumerate(fallback_models, 1):
        values = [entry] if isinstance(entry, str) else list(entry.values())
        if not all(v.strip() for v in values):
            raise UsageError(
                f"setting 'fallback_models': entry {n} has an empty value; name a model, e.g. openai:gpt-4o-mini"
            )
    for model, limits in model_budgets.items():
        for key, value in limits.items():
            if not (math.isfinite(value) and value > 0):
                raise UsageError(
                    f"setting 'model_budgets': {model}.{key} must be a number greater than 0, got {value!r}"
                )
