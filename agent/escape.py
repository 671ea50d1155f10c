"""Text the model wrote, made safe to print or to log as one line.

A terminal obeys control sequences: escape codes can move the cursor, hide text, set the window
title or write the clipboard (OSC 52), and a newline in a tool argument would forge a line in the
cycle log. Everything model-written goes through `escape_controls` before it reaches a terminal,
cron mail or a line-oriented log.
"""

from __future__ import annotations

import re

# C0 controls (but tab), DEL, C1 controls, and the bidirectional overrides that reorder text.
_CONTROLS = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_CONTROLS_BUT_NEWLINE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# What json.dumps(ensure_ascii=False) leaves raw (it escapes C0 itself; its layout uses \n).
_CONTROLS_JSON_KEEPS = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escaped(match: re.Match) -> str:
    char = match.group()
    if char == "\n":
        return "\\n"
    if char == "\r":
        return "\\r"
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_controls(text: object, keep_newlines: bool = False) -> str:
    """`text` with every control character shown as an escape (`\\x1b`, `\\n`), printable as is."""
    pattern = _CONTROLS_BUT_NEWLINE if keep_newlines else _CONTROLS
    return pattern.sub(_escaped, str(text))


def escape_json(text: str) -> str:
    """JSON text with the controls JSON leaves raw (DEL, C1, bidi overrides) written as \\uXXXX:
    the same data for a parser, nothing a terminal obeys. JSON's own syntax is ASCII, so every
    match is inside a string."""
    return _CONTROLS_JSON_KEEPS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def escape_tree(value: object) -> object:
    """A copy of a loaded state (lists, mappings, scalars) with every string escaped, newlines
    kept, for printing field by field. Loaded YAML is depth-bounded, so recursion is safe."""
    if isinstance(value, dict):
        return {escape_tree(k): escape_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [escape_tree(v) for v in value]
    return escape_controls(value, keep_newlines=True) if isinstance(value, str) else value
