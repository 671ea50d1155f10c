"""A loaded value as a person reads it in a line of text: never Python's repr.

YAML and JSON give None, lists and mappings; an f-string would print them as Python does (`None`,
`['a']`, `{'task': ...}`). `plain` writes them the way the rest of the output reads: nothing as
"(none)", a list as its items, a mapping as `key: value` pairs, anything nested in parentheses.
"""

from __future__ import annotations

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
