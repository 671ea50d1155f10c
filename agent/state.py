"""The scratchpad state: its fields, their types, a fresh default, validation and invariants.

Pure functions only: no files here. Everything that needs to know what a valid state is
(loading, the dispatcher, the invariants checked before saving) asks this module.
"""

from __future__ import annotations

import datetime as _dt
import json
from typing import Any

from agent.common.escape import escape_controls
from agent.common.jsonschema import check
from agent.common.plain import described, kind

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

# The key of active.yaml holding each list section's id counter (agent/memory/sections.py).
SECTION_IDS_KEY = "section_ids"
# Top-level keys of active.yaml the runtime uses beside the fields (-> what each holds). With the
# fields, they are the names no section of config.yaml may take (setting_checks.section_specs).
RUNTIME_KEYS = {
    "checks": "the acceptance checks of queued tasks",
    "inbox_applied": "the ids of the last queued edits applied",
    SECTION_IDS_KEY: "the sections' id counters",
}


def taken_keys() -> dict[str, str]:
    """Every top-level key of active.yaml a section may not be named: each field, each runtime key."""
    return {**{name: "a field of the scratchpad" for name in FIELDS}, **RUNTIME_KEYS}


def fresh_state() -> dict:
    """A new default state. Each call returns new objects."""
    return {name: factory() for name, factory in FIELDS.items()}


def field_problem(name: str, value: Any) -> str | None:
    """Why `value` is not valid for schema field `name`, or None when it is."""
    problem = check(value, FIELD_SCHEMAS[name], name)
    return f"field {problem}" if problem else None


# One field value that update_scratchpad may set, at most (as JSON, in UTF-8 bytes): megabytes
# of goals are refused at once, with a note the model reads, instead of filling the scratchpad.
MAX_FIELD_BYTES = 64 * 1024


def field_size_problem(name: str, value: Any) -> str | None:
    """Why `value` is too large to set field `name` to, or None when it fits."""
    size = len(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    if size <= MAX_FIELD_BYTES:
        return None
    return f"field '{name}' would be {size:,} bytes, over the {MAX_FIELD_BYTES:,}-byte limit for one field"


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
        return [f"top level must be a mapping of fields, got {described(state)}"]
    found = [_key_problem(path, key) for path, key in _non_string_keys(state)]
    for name in FIELDS:
        if name in state:
            problem = field_problem(name, state[name])
            if problem:
                found.append(problem)
    return found


def _non_string_keys(value: Any) -> list[tuple[str, Any]]:
    """(where, key) for every mapping key below `value` that is not a string. Every command
    prints the state as JSON too, and JSON keys are strings: such a key is refused at load."""
    found, stack = [], [("", value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    found.append((where, key))
                else:
                    stack.append((f"{where}.{key}" if where else key, child))
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", child) for i, child in enumerate(item))
    return found


def _key_problem(where: str, key: Any) -> str:
    # as the YAML wrote it (7, true, null, 2026-01-01), never Python's repr (True, None)
    shown = key.isoformat() if isinstance(key, (_dt.date, _dt.datetime)) else json.dumps(key, default=str)
    place = f" in '{where}'" if where else ""
    return f"key {shown}{place} is not a string but {kind(key)}; quote it in the YAML ('{shown}': ...)"


def now_iso() -> str:
    """The current time, ISO 8601 with a UTC offset (what `last_updated` holds)."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def parse_time(stamp: Any) -> _dt.datetime | None:
    """An ISO time stamp as an aware datetime (UTC when it names no zone); None if it is not one."""
    if not isinstance(stamp, str):
        return None
    try:
        when = _dt.datetime.fromisoformat(stamp)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=_dt.timezone.utc)  # ours are UTC


class InvariantViolation(Exception):
    """The state a cycle produced breaks a rule the runtime guarantees; it is not saved."""


def invariant_problems(before: dict, after: dict) -> list[str]:
    """Rules checked before anything is saved (the runtime, not the model, guards the evidence)."""
    found = problems(after)
    if not found:
        done_before, done_after = before["completed_tasks"], after["completed_tasks"]
        if done_after[: len(done_before)] != done_before:
            found.append("completed_tasks read at the start are no longer a prefix of completed_tasks")
        for name in RUNTIME_FIELDS:
            if after.get(name) != before.get(name):
                found.append(f"runtime-owned field '{name}' was changed during the cycle")
    return found


def add_note(state: dict, line: str) -> str:
    """Append one note line: whatever `line` holds (an endpoint's error, a server's text) stays one
    line, escaped here, where it enters the state; the line as appended."""
    line = escape_controls(line)
    state["notes"] = f"{state['notes']}\n{line}" if state["notes"] else line
    return line
