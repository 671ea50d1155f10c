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
