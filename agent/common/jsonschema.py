"""A small JSON Schema subset: checking values, naming types, and schemas from annotations.

A leaf but for the words it names a value in (plain.py): the scratchpad fields, the settings and the tools' arguments are all checked here.
"""

from __future__ import annotations

import json
import types
import typing
from typing import Any

from agent.common.plain import described

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
        return f"{label} must be {_article(type_name(s))}, got {described(value)}"
    return _check_value(value, s, label) or _check_items(value, s, where) or _check_mapping(value, s, where, label)


def _check_value(value: Any, s: dict, label: str) -> str | None:
    """The checks on the value itself: const, enum, type."""
    if "const" in s and value != s["const"]:
        return f"{label} must be {_shown(s['const'])}, got {described(value)}"
    if "enum" in s and value not in s["enum"]:
        return f"{label} must be one of {', '.join(map(_shown, s['enum']))}, got {described(value)}"
    types = s.get("type")
    if types is not None:
        types = types if isinstance(types, list) else [types]
        if not any(_JSON_TYPES[t](value) for t in types):
            return f"{label} must be {_article(type_name(s))}, got {described(value)}"
    return None


def _check_items(value: Any, s: dict, where: str) -> str | None:
    """The first list item that does not match `items`."""
    if isinstance(value, list) and "items" in s:
        for i, item in enumerate(value):
            problem = check(item, s["items"], f"{where}[{i}]")
            if problem:
                return problem
    return None


def _check_mapping(value: Any, s: dict, where: str, label: str) -> str | None:
    """A mapping's required keys first, then each entry in order."""
    if not isinstance(value, dict):
        return None
    for key in s.get("required", []):
        if key not in value:
            return f"{label} is missing '{key}'"
    for key, item in value.items():
        problem = _check_entry(key, item, s, where, label)
        if problem:
            return problem
    return None


def _check_entry(key: Any, item: Any, s: dict, where: str, label: str) -> str | None:
    """One entry of a mapping: a string key, checked by `properties` or else `additionalProperties`."""
    if not isinstance(key, str):
        return f"{label} has a key that is not a string: {key!r}"
    inner = f"{where}.{key}" if where else key
    props = s.get("properties", {})
    if key in props:
        return check(item, props[key], inner)
    extra = s.get("additionalProperties", True)
    if extra is False:
        return f"{label} has an unexpected key '{key}'"
    if isinstance(extra, dict):
        return check(item, extra, inner)
    return None


def _shown(value: Any) -> str:
    """A schema's constant as a message quotes it: text in single quotes, anything else as JSON."""
    return f"'{value}'" if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


_PY_TO_JSON = {str: "string", int: "integer", float: "number", bool: "boolean"}


def schema_for(annotation: Any) -> dict:
    """JSON Schema for a type annotation: str, int, float, bool, list[X], dict[str, X], X | None."""
    if annotation is Any:
        return {}  # any JSON value
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        inner = schema_for(members[0]) if len(members) == 1 else {"anyOf": [schema_for(m) for m in members]}
        if len(typing.get_args(annotation)) > len(members):
            if "type" in inner and isinstance(inner["type"], str):
                return {**inner, "type": [inner["type"], "null"]}
            return {"anyOf": [inner, {"type": "null"}]}
        return inner
    if origin is list:
        (item,) = typing.get_args(annotation) or (str,)
        return {"type": "array", "items": schema_for(item)}
    if origin is dict:
        _, value = typing.get_args(annotation) or (str, str)
        return {"type": "object", "additionalProperties": schema_for(value)}
    if annotation in _PY_TO_JSON:
        return {"type": _PY_TO_JSON[annotation]}
    raise TypeError(f"unsupported parameter type {annotation!r}; use str, int, float, bool, list[...] or X | None")
