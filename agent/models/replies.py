"""Finding the action in a model reply: bare JSON, a fenced ```json block, or JSON inside prose.

A reply is untrusted and may be huge or built to be slow, so the search is linear in the
reply's length: a size cap first, fences found with str.find (no backtracking regex), and in
prose one pass pairs the braces (outside and inside JSON strings) so that each candidate
object is decoded from its own span, a bounded number of times. (The old search ran
`raw_decode` at every '{': on a reply of 400,000 '{' each failure counted the newlines before
it, and the whole took minutes.)

Replies are read as the field writes them: a raw control character (a newline, a tab) inside a
JSON string is accepted, as most JSON producers and parsers do (`json.loads(strict=False)`).
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterator

from agent.common.escape import escape_controls
from agent.common.plain import described, kind
from agent.models.base import ToolCall

# Candidate objects decoded from prose at most (a real reply has one or two), and the characters
# decoded in all, per character of the reply: together they keep the search linear.
MAX_DECODE_ATTEMPTS = 200
DECODED_CHARS_PER_REPLY_CHAR = 4
_FENCE = "```"
_BRACES_AND_QUOTES = re.compile(r'[{}"\\]')


class ReplyError(ValueError):
    """The reply holds no usable action; the message says why."""


def reply_size_problem(text: str, max_bytes: int | None) -> str | None:
    """Why a reply is too large to parse, or None (max_bytes None: no cap)."""
    if max_bytes is None or len(text) <= max_bytes // 4:  # cheap: a character is at most 4 bytes
        return None
    size = len(text.encode("utf-8", "surrogatepass"))
    if size <= max_bytes:
        return None
    return f"reply is {size:,} bytes, over the {max_bytes:,}-byte limit (max_reply_bytes); nothing was parsed"


def parse_reply(text: Any, max_bytes: int | None = None) -> dict:
    """The action object in a reply; ReplyError when there is none or the reply is over max_bytes.
    A native tool call is one action too: its name and its decoded arguments."""
    if isinstance(text, ToolCall):
        return call_action(text, max_bytes)
    stripped = _reply_text(text, max_bytes)
    return _the_action(_candidates(stripped), stripped)


def _reply_text(text: Any, max_bytes: int | None) -> str:
    """The reply stripped; ReplyError when it is not text, over max_bytes or empty."""
    if not isinstance(text, str):
        raise ReplyError(f"reply is not text: {described(text)}")
    too_large = reply_size_problem(text, max_bytes)
    if too_large:
        raise ReplyError(too_large)
    stripped = text.strip()
    if not stripped:
        raise ReplyError("reply is empty")
    return stripped


def _candidates(stripped: str) -> list[Any]:
    """The values a reply may hold its action in: the whole reply if it is JSON; else the fenced
    blocks that decode; else the objects found in prose."""
    try:
        return [json.loads(stripped, strict=False)]
    except RecursionError:
        raise ReplyError("reply JSON is nested too deeply") from None
    except ValueError:
        pass
    candidates: list[Any] = []
    for block in fenced_blocks(stripped):
        try:
            candidates.append(decode_span(block))
        except (ValueError, RecursionError):
            pass
    return candidates or list(objects_in(stripped))


def _the_action(candidates: list[Any], stripped: str) -> dict:
    """The first candidate with a "tool" key (none may hold text that is not valid Unicode), or
    ReplyError saying what the reply held instead."""
    actions = [value for value in candidates if isinstance(value, dict) and "tool" in value]
    if not all(_encodable(value) for value in actions):
        raise ReplyError("reply holds text that is not valid Unicode (a lone surrogate escape such as \\ud800)")
    if actions:
        return actions[0]
    if not candidates:
        raise ReplyError(f"no JSON object found in reply: {shown_reply(stripped, 120)}")
    first = candidates[0]
    if not isinstance(first, dict):
        raise ReplyError(f"reply is JSON but {kind(first)}, not an object: {shown_reply(stripped, 120)}")
    raise ReplyError(f'JSON object has no "tool" key: {shown_reply(stripped, 120)}')


def call_action(call: ToolCall, max_bytes: int | None = None) -> dict:
    """A native call as the action a text reply would hold: {"tool": its name, "args": its arguments
    decoded}. The arguments are as untrusted as any reply: capped, decoded once, an object or refused."""
    name, args = clip_line(call.name, 60), call.arguments
    if isinstance(args, str):
        too_large = reply_size_problem(args, max_bytes)
        if too_large:
            raise ReplyError(f"tool call {name}: arguments: {too_large}")
        try:
            # strict=False: a raw newline inside a string is taken, as llama.cpp's grammar for a schema lets
            # a model write one (the 135M model's done summaries were refused for it); "" means no arguments
            args = json.loads(args, strict=False) if args.strip() else {}
        except RecursionError:
            raise ReplyError(f"tool call {name}: arguments are nested too deeply") from None
        except ValueError as exc:
            raise ReplyError(
                f"tool call {name}: arguments are not valid JSON ({exc}): {clip_line(call.arguments, 120)!r}"
            ) from None
    if not isinstance(args, dict):
        raise ReplyError(f"tool call {name}: arguments must be a JSON object, got {described(args)}")
    action = {"tool": call.name, "args": args}
    if not _encodable(action):
        raise ReplyError("tool call holds text that is not valid Unicode (a lone surrogate escape such as \\ud800)")
    return action


def decode_span(span: str) -> Any:
    """One candidate decoded (its own function so tests can count the work done)."""
    return json.loads(span, strict=False)


def fenced_blocks(text: str) -> Iterator[str]:
    """The insides of ``` fences (an optional json/JSON word after the opening fence dropped)."""
    pos = 0
    while (start := text.find(_FENCE, pos)) >= 0:
        end = text.find(_FENCE, start + len(_FENCE))
        if end < 0:
            return
        block = text[start + len(_FENCE) : end]
        if block[:4] in ("json", "JSON"):
            block = block[4:]
        yield block
        pos = end + len(_FENCE)


def brace_pairs(text: str) -> list[tuple[int, int]]:
    """(open, close) index of every matched brace pair, outermost first, in one pass. Outside
    any brace quotes are prose; inside, JSON strings (with escapes) hide their braces."""
    pairs: list[tuple[int, int]] = []
    opened: list[int] = []
    in_string = False
    escaped_at = -1  # the character after a backslash inside a string
    for match in _BRACES_AND_QUOTES.finditer(text):
        char, at = match.group(), match.start()
        if at == escaped_at:
            continue
        if in_string:
            if char == "\\":
                escaped_at = at + 1
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = bool(opened)
        elif char == "{":
            opened.append(at)
        elif char == "}" and opened:
            pairs.append((opened.pop(), at))
    return sorted(pairs)


def objects_in(text: str) -> Iterator[Any]:
    """JSON objects in free text (prose around a JSON action), outer ones first; the inside of
    an object that decoded is not searched again, and the search stops after MAX_DECODE_ATTEMPTS
    or DECODED_CHARS_PER_REPLY_CHAR * len(text) characters decoded (nested spans that fail)."""
    decoded_until = -1
    attempts = 0
    chars_left = DECODED_CHARS_PER_REPLY_CHAR * len(text)
    for start, end in brace_pairs(text):
        if start <= decoded_until:
            continue
        attempts += 1
        chars_left -= end + 1 - start
        if attempts > MAX_DECODE_ATTEMPTS or chars_left < 0:
            return
        try:
            value = decode_span(text[start : end + 1])
        except (ValueError, RecursionError):
            continue
        decoded_until = end
        yield value


def _encodable(value: Any) -> bool:
    """Whether a decoded reply can be written as UTF-8 (JSON allows lone surrogates; files do not)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except (UnicodeEncodeError, RecursionError, ValueError):
        return False
    return True


def shown_reply(text: str, limit: int) -> str:
    """A reply in a parse error note: quoted, cut to `limit` characters, every control character
    escaped (a newline as \\n), so a reply that looks valid on one line is shown as it was."""
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return f"'{escape_controls(text)}'"


def clip_line(text: object, limit: int) -> str:
    """`text` on one line, control characters escaped, cut to `limit` characters."""
    text = escape_controls(" ".join(str(text).split()))
    return text if len(text) <= limit else text[: limit - 1] + "…"
