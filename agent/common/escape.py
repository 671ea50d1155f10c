"""Text the model wrote, made safe to print or to log as one line.

A terminal obeys control sequences: escape codes can move the cursor, hide text, set the window
title or write the clipboard (OSC 52), and a newline in a tool argument would forge a line in the
cycle log. Everything model-written goes through `escape_controls` before it reaches a terminal,
cron mail or a line-oriented log, and every command's stdout and stderr pass `escape_output` on
their way out (`agent/cli/__init__.py`), so text a command forgot to escape is escaped anyway.

What is escaped: C0 controls (but tab), DEL, C1 controls (NEL U+0085 among them), every other
character `str.splitlines` splits on (U+2028, U+2029; \v \f \x1c-\x1e are C0), and the
bidirectional controls that reorder text (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069),
and lone surrogates (U+D800-U+DFFF: text that cannot be written as UTF-8).
"""

from __future__ import annotations

import re

# Line separators and bidirectional controls beyond C0/C1, and lone surrogates (from a JSON "\ud800" or a
# plugin's bytes decoded with surrogateescape): text that UTF-8 cannot write.
_WIDE = "\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_CONTROLS = re.compile(f"[\x00-\x08\x0a-\x1f\x7f-\x9f{_WIDE}]")
_CONTROLS_BUT_NEWLINE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_WIDE}]")
# What json.dumps(ensure_ascii=False) leaves raw (it escapes C0 itself; its layout uses \n).
_CONTROLS_JSON_KEEPS = re.compile(f"[\x7f-\x9f{_WIDE}]")
# The colour and bold sequences click.style writes (the only escape sequences a command sends).
_STYLE = re.compile("(\x1b\\[[0-9;]*m)")


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


def escape_output(text: str) -> str:
    """What a command writes to stdout or stderr, made safe: every control escaped but newline,
    tab and click's own style sequences (colour, bold)."""
    parts = _STYLE.split(text)
    return "".join(part if i % 2 else escape_controls(part, keep_newlines=True) for i, part in enumerate(parts))


def escape_tree(value: object) -> object:
    """A copy of a loaded state (lists, mappings, scalars) with every string escaped onto one
    line, for printing field by field. Loaded YAML is depth-bounded, so recursion is safe."""
    if isinstance(value, dict):
        return {escape_tree(k): escape_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [escape_tree(v) for v in value]
    return escape_controls(value) if isinstance(value, str) else value
