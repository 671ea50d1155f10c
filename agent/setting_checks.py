"""Checks of settings: the one checker of a field's own constraints, and the shapes of prices, MCP servers,
the fallback models and their budgets, and the operator's scratchpad sections (SectionSpec).

A leaf under config.py: it knows the checks, config.py knows the settings (each field carries its constraints).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent.common.outcomes import UsageError
from agent.common.plain import described

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
    """Each fallback entry names a model, and one with its own endpoint names its own key (or
    `inherit`: no key goes to another endpoint unless the operator says so); each model budget is
    a number above 0."""
    for n, entry in enumerate(fallback_models, 1):
        values = [entry] if isinstance(entry, str) else list(entry.values())
        if not all(v.strip() for v in values):
            raise UsageError(
                f"setting 'fallback_models': entry {n} has an empty value; name a model, e.g. openai:gpt-4o-mini"
            )
        if isinstance(entry, dict) and "base_url" in entry and "api_key_env" not in entry:
            raise UsageError(
                f"setting 'fallback_models': entry {n} ({entry['model']}) has its own base_url but no api_key_env: "
                f"add api_key_env: VARIABLE (its own key), or api_key_env: inherit to send it the primary's key"
            )
    for model, limits in model_budgets.items():
        for key, value in limits.items():
            if not (math.isfinite(value) and value > 0):
                raise UsageError(
                    f"setting 'model_budgets': {model}.{key} must be a number greater than 0, got {value!r}"
                )


# ------------------------------------------------------------------------------------ sections
# `sections` in config.yaml: the operator's own parts of the scratchpad (agent/memory/sections.py
# gives them their behaviour). Each is checked here, once, into a SectionSpec; every reader (the
# state's rules, the schema the model is offered, the prompt, consolidation) uses the specs.

SECTION_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
SECTION_KINDS = ("text", "list")
WHEN_FULL = ("archive", "refuse")
SECTION_KEYS = ("kind", "limit", "entry_chars", "description", "read_only", "when_full", "surface")
DEFAULT_ENTRY_CHARS = 500
MOST_SECTIONS = 32
MOST_DESCRIPTION_CHARS = 500
# The most each kind's `limit` may be, with its unit, and the bounds of a list entry's characters.
SECTION_LIMITS = {"text": (100_000, "characters"), "list": (1000, "entries")}
MOST_ENTRY_CHARS = 10_000
# What all sections together may hold, in characters (an entry's runtime fields counting as
# ENTRY_OVERHEAD_CHARS): full sections then take at most a few MB of UTF-8, well inside the
# largest scratchpad that loads (store/state_file.MAX_SCRATCHPAD_BYTES), beside notes and tasks.
MOST_SECTION_CHARS = 400_000
ENTRY_OVERHEAD_CHARS = 100


@dataclass(frozen=True)
class SectionSpec:
    """One section as config.yaml defines it: a text (`limit` characters) or a list (`limit` entries
    of at most `entry_chars` characters each)."""

    name: str
    kind: str  # "text" | "list"
    limit: int
    description: str = ""
    entry_chars: int | None = None  # list sections only
    read_only: bool = False  # only the operator writes it (agent memory ...)
    when_full: str = "archive"  # "archive": the weakest model entries make room; "refuse": the write is refused
    surface: bool = False  # what a person should know: shown by status, the hook and the metrics

    @property
    def is_list(self) -> bool:
        return self.kind == "list"

    @property
    def stability(self) -> int:
        """Its place in the prompt and the schema: read-only first, then text, then lists (the
        most stable first, so the bytes before the first change stay the same for a prompt cache)."""
        return 0 if self.read_only else (1 if self.kind == "text" else 2)

    @property
    def capacity(self) -> int:
        """The characters it may hold when full (an entry's runtime fields counted too)."""
        if self.entry_chars is None:
            return self.limit
        return self.limit * (self.entry_chars + ENTRY_OVERHEAD_CHARS)

    def edit_schema(self) -> dict:
        """The JSON Schema of the value update_scratchpad takes for this section (a string whose
        prefix says what to do), with the rules spelled out for the model."""
        about = f"{self.description} " if self.description else ""
        if self.is_list:
            rule = (
                f"List of at most {self.limit} entries, each one line of at most {self.entry_chars} characters. "
                '"APPEND: <text>" adds an entry (restating one already there confirms it); '
                '"REMOVE: <id>" removes one (recall finds it again by its id).'
            )
        else:
            rule = (
                f'Text of at most {self.limit} characters. "APPEND: <line>" adds a line; "CLEAR" empties it; '
                "any other value replaces it."
            )
        return {"type": "string", "description": about + rule}


def by_stability(specs: tuple[SectionSpec, ...]) -> list[SectionSpec]:
    """`specs` with the most stable first (SectionSpec.stability), config order kept within each."""
    return sorted(specs, key=lambda spec: spec.stability)


def edit_schemas(specs: tuple[SectionSpec, ...]) -> dict[str, dict]:
    """update_scratchpad's argument schemas for the sections the model may write (read-only ones left
    out), the most stable first: what tools/base.py adds to the fields' own (FIELD_SCHEMAS)."""
    return {spec.name: spec.edit_schema() for spec in by_stability(specs) if not spec.read_only}


def section_specs(sections: Mapping[str, Any], reserved: Mapping[str, str]) -> tuple[SectionSpec, ...]:
    """The checked specs of the `sections` setting, in config order; UsageError names the first
    section and key that is wrong. `reserved`: the top-level keys of active.yaml that are taken
    (a field's or a runtime key's name -> what it holds)."""
    if len(sections) > MOST_SECTIONS:
        raise UsageError(f"setting 'sections' defines {len(sections)} sections; at most {MOST_SECTIONS} are allowed")
    specs = tuple(_section_spec(name, raw, reserved) for name, raw in sections.items())
    total = sum(spec.capacity for spec in specs)
    if total > MOST_SECTION_CHARS:
        raise UsageError(
            f"setting 'sections' could hold {total:,} characters in all (an entry's runtime fields counting as "
            f"{ENTRY_OVERHEAD_CHARS}), over the {MOST_SECTION_CHARS:,} a scratchpad has room for; lower some limits"
        )
    return specs


def _section_spec(name: Any, raw: Any, reserved: Mapping[str, str]) -> SectionSpec:
    if not isinstance(name, str) or not SECTION_NAME.fullmatch(name):
        raise UsageError(
            f"setting 'sections': section name {name!r} must be 1 to 32 lowercase letters, digits or '_', "
            f"starting with a letter"
        )
    if name in reserved:
        raise UsageError(
            f"setting 'sections': '{name}' is already a key of active.yaml ({reserved[name]}); name the section otherwise"
        )
    where = f"sections.{name}"
    if not isinstance(raw, Mapping):
        raise UsageError(f"setting '{where}' must be a mapping of {', '.join(SECTION_KEYS)}, got {described(raw)}")
    for key in raw:
        if key not in SECTION_KEYS:
            raise UsageError(f"setting '{where}': unknown key {key!r} (keys: {', '.join(SECTION_KEYS)})")
    kind = _word(raw, where, "kind", SECTION_KINDS)
    limit = _whole(raw, where, "limit", *SECTION_LIMITS[kind])
    if kind == "text" and "entry_chars" in raw:
        raise UsageError(f"setting '{where}.entry_chars' is for list sections; a text section's limit is in characters")
    entry_chars = _whole(raw, where, "entry_chars", MOST_ENTRY_CHARS, "characters", DEFAULT_ENTRY_CHARS)
    description = _description(raw, where)
    when_full = _word(raw, where, "when_full", WHEN_FULL, "archive")
    flags = {key: raw.get(key, False) for key in ("read_only", "surface")}
    for key, value in flags.items():
        if not isinstance(value, bool):
            raise UsageError(f"setting '{where}.{key}' must be true or false, got {described(value)}")
    return SectionSpec(
        name,
        kind,
        limit,
        description,
        entry_chars if kind == "list" else None,
        flags["read_only"],
        when_full,
        flags["surface"],
    )


def _description(raw: Mapping, where: str) -> str:
    description = raw.get("description", "")
    if not isinstance(description, str) or len(description.splitlines()) > 1:
        raise UsageError(f"setting '{where}.description' must be one line of text, got {described(description)}")
    if len(description) > MOST_DESCRIPTION_CHARS:
        raise UsageError(
            f"setting '{where}.description' is {len(description)} characters, over {MOST_DESCRIPTION_CHARS}"
        )
    return description.strip()


def _word(raw: Mapping, where: str, key: str, words: tuple[str, ...], default: str | None = None) -> str:
    """A key of a section that is one of `words` (a YAML `yes` or an empty value is none of them)."""
    value = raw.get(key, default) if default is not None else _required(raw, where, key, " or ".join(words))
    if not isinstance(value, str):
        raise UsageError(f"setting '{where}.{key}' must be one of {', '.join(words)}, got {described(value)}")
    check_constraints(f"{where}.{key}", value, {"choices": words})
    return value


def _required(raw: Mapping, where: str, key: str, what: str) -> Any:
    if key not in raw or raw[key] is None:
        raise UsageError(f"setting '{where}.{key}' is missing: {what}")
    return raw[key]


def _whole(raw: Mapping, where: str, key: str, most: int, unit: str, default: int | None = None) -> int:
    """A whole-number key of a section, from 1 to `most` (`unit` named in the message)."""
    value = raw.get(key, default) if default is not None else _required(raw, where, key, f"the most {unit} it holds")
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"setting '{where}.{key}' must be a whole number of {unit}, got {described(value)}")
    check_constraints(f"{where}.{key}", value, {"minimum": 1, "maximum": most, "unit": unit})
    return value
