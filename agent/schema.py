"""The scratchpad schema: its fields, their types, a fresh default, and validation.

Pure functions only: no files here. Everything that needs to know what a valid state is
(loading, the dispatcher, the invariants checked before saving) asks this module.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

# Each field's type, written once as JSON Schema: validation, the update_scratchpad tool's
# argument schema and the type names in messages all come from here.
FIELD_SCHEMAS: dict[str, dict] = {
    "goals": {"type": "array", "items": {"type": "string"}},
    "current_task": {"type": ["string", "null"]},
    "pending_actions": {"type": "array", "items": {"type": "string"}},
    "completed_tasks": {
        "type": "array",
        "items": {
            "anyOf": [
                {"type": "string"},
                {"type": "object", "additionalProperties": {"type": ["string", "null"]}},
            ]
        },
    },
    "notes": {"type": "string"},
    "last_updated": {"type": ["string", "null"]},
}

_DEFAULTS = {"array": list, "string": str, "null": lambda: None}


def _default_factory(field_schema: dict):
    types = field_schema["type"] if isinstance(field_schema["type"], list) else [field_schema["type"]]
    return _DEFAULTS["null" if "null" in types else types[0]]


# Defaults are factories so every caller gets a fresh copy, never a shared list.
FIELDS = {name: _default_factory(s) for name, s in FIELD_SCHEMAS.items()}

# Fields only the runtime may write. The model's update_scratchpad may not touch them.
RUNTIME_FIELDS = frozenset({"last_updated"})


def fresh_state() -> dict:
    """A new default state. Each call returns new objects."""
    return {name: factory() for name, factory in FIELDS.items()}


_JSON_TYPES = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


def type_name(s: dict) -> str:
    """A reader's name for a (subset) JSON Schema: 'list of strings', 'string or null'."""
    if "anyOf" in s:
        return " or ".join(type_name(x) for x in s["anyOf"])
    types = s.get("type", [])
    names = []
    for t in types if isinstance(types, list) else [types]:
        if t == "array":
            names.append("list of " + (type_name(s["items"]) + "s" if "items" in s else "values").replace("ys", "ies"))
        elif t == "object":
            names.append("mapping")
        else:
            names.append(t)
    return " or ".join(names) or "value"


def _article(name: str) -> str:
    return f"{'an' if name[:1] in 'aeiou' else 'a'} {name}"


def check(value: Any, s: dict, where: str = "") -> str | None:
    """Why `value` does not match schema `s` (a small JSON Schema subset), or None.

    `where` is the path to the value ("goals", "pending_actions[0]", "message"), quoted in
    messages. The subset: type (one or a list), items, properties, required,
    additionalProperties, anyOf, enum, const: all the schemas in this project use.
    """
    label = f"'{where}'" if where else "value"
    if "anyOf" in s:
        if any(check(value, option, where) is None for option in s["anyOf"]):
            return None
        return f"{label} must be {_article(type_name(s))}, got {describe(value)}"
    if "const" in s and value != s["const"]:
        return f"{label} must be {s['const']!r}, got {describe(value)}"
    if "enum" in s and value not in s["enum"]:
        return f"{label} must be one of {', '.join(map(repr, s['enum']))}, got {describe(value)}"
    types = s.get("type")
    if types is not None:
        types = types if isinstance(types, list) else [types]
        if not any(_JSON_TYPES[t](value) for t in types):
            return f"{label} must be {_article(type_name(s))}, got {describe(value)}"
    if isinstance(value, list) and "items" in s:
        for i, item in enumerate(value):
            problem = check(item, s["items"], f"{where}[{i}]")
            if problem:
                return problem
    if isinstance(value, dict):
        props = s.get("properties", {})
        for key in s.get("required", []):
            if key not in value:
                return f"{label} is missing '{key}'"
        extra = s.get("additionalProperties", True)
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{label} has a key that is not a string: {key!r}"
            inner = f"{where}.{key}" if where else key
            if key in props:
                problem = check(item, props[key], inner)
            elif extra is False:
                problem = f"{label} has an unexpected key '{key}'"
            elif isinstance(extra, dict):
                problem = check(item, extra, inner)
            else:
                problem = None
            if problem:
                return problem
    return None


def field_problem(name: str, value: Any) -> str | None:
    """Why `value` is not valid for schema field `name`, or None when it is."""
    problem = check(value, FIELD_SCHEMAS[name], name)
    return f"field {problem}" if problem else None


def describe(value: Any) -> str:
    """A short description of a value for error messages (type plus a clipped repr)."""
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


def normalize(data: dict) -> dict:
    """Fill missing schema fields with defaults; turn a YAML timestamp into its ISO string.

    Unknown top-level keys are kept: they are the operator's, and dropping them would lose data.
    """
    out = dict(data)
    for name, factory in FIELDS.items():
        if name not in out or (out[name] is None and factory() is not None):
            out[name] = factory()
    if isinstance(out["last_updated"], (_dt.datetime, _dt.date)):
        out["last_updated"] = out["last_updated"].isoformat()
    return out


def problems(state: Any) -> list[str]:
    """Every reason `state` is not a valid scratchpad (empty list when it is)."""
    if not isinstance(state, dict):
        return [f"top level must be a mapping of fields, got {describe(state)}"]
    bad_keys = [k for k in state if not isinstance(k, str)]
    found = [f"key {k!r} is not a string" for k in bad_keys]
    for name in FIELDS:
        if name in state:
            problem = field_problem(name, state[name])
            if problem:
                found.append(problem)
    return found


def now_iso() -> str:
    """The current time, ISO 8601 with a UTC offset (what `last_updated` holds)."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
