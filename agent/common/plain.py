"""A loaded value as a person reads it in a line of text: never Python's repr.

YAML and JSON give None, lists and mappings; an f-string would print them as Python does (`None`,
`['a']`, `{'task': ...}`). `plain` writes them the way the rest of the output reads: nothing as
"(none)", a list as its items, a mapping as `key: value` pairs, anything nested in parentheses.
`described` says what a refused value is, for a message, and `kind` what kind of value it is: the
one way every message of the project names a value it was given (a schema's check, a setting, a
reply, a section edit), never a Python type name.
"""

from __future__ import annotations

import datetime as _dt
import json
from typing import Any


def plain(value: Any, nothing: str = "(none)") -> str:
    """`value` as text: None as `nothing`, true/false, a list's items joined by ", ", a mapping's
    pairs by "; ", a list or mapping inside another in parentheses."""
    if value is None:
        return nothing
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "; ".join(f"{plain(key)}: {_nested(item)}" for key, item in value.items()) or "(empty)"
    if isinstance(value, (list, tuple)):
        return ", ".join(_nested(item) for item in value) or "(empty)"
    return str(value)


def _nested(value: Any) -> str:
    text = plain(value)
    return f"({text})" if isinstance(value, (dict, list, tuple)) and value else text


def described(value: Any, limit: int = 60) -> str:
    """What a value someone sent is, for a message saying why it was refused: its kind in words and,
    for a scalar, the value itself (text as JSON, clipped to `limit`); never a Python repr.
    Control characters are left to the escape every printed line goes through."""
    if value is None:
        return "null"
    if isinstance(value, bool):  # before int: a bool is an int to Python
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, str):
        shown = json.dumps(value if len(value) <= limit else value[: limit - 3] + "...", ensure_ascii=False)
        return f"the text {shown}"
    if isinstance(value, (list, tuple)):
        return f"a list of {counted(len(value), 'item')}"
    if isinstance(value, dict):
        return f"a mapping of {counted(len(value), 'key')}"
    if isinstance(value, _dt.date):  # YAML reads 2026-01-01 as a date
        return f"the {kind(value)[2:]} {value.isoformat()}"
    return kind(value)


def kind(value: Any) -> str:
    """A value's kind in a reader's words: `a mapping`, `a list`, `text`, `a number`, `a date`..."""
    if value is None:
        return "null"
    if isinstance(value, bool):  # before int: a bool is an int to Python
        return "a boolean"
    return next((words for kind_, words in _KINDS if isinstance(value, kind_)), "a value of another kind")


# datetime before date: a datetime is a date to Python
_KINDS = (
    (dict, "a mapping"),
    ((list, tuple), "a list"),
    (str, "text"),
    ((int, float), "a number"),
    (_dt.datetime, "a date and time"),
    (_dt.date, "a date"),
)


def counted(count: int, one: str, many: str = "") -> str:
    """A count with its noun in the number it takes: '1 line', '3 lines', '1 entry', '2 entries'."""
    return f"{count} {one if count == 1 else many or one + 's'}"
