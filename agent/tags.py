"""Note tags: the one definition every writer and reader of notes shares.

A note line starts with a tag, `[TOOL] echo({"message": "hi"}) -> hi`. Writers build lines with
`Tag.X.line(text)`; readers split them with `Tag.of(line)`. Nothing else spells a tag.
"""

from __future__ import annotations

import enum


class Tag(str, enum.Enum):
    TOOL = "[TOOL]"
    UPDATE = "[UPDATE]"
    COMPLETED = "[COMPLETED]"
    PARSE_ERROR = "[PARSE ERROR]"
    UNKNOWN_TOOL = "[UNKNOWN TOOL]"
    TOOL_ERROR = "[TOOL ERROR]"
    CHECK_FAILED = "[CHECK FAILED]"
    APPROVAL = "[APPROVAL]"
    STOPPED = "[STOPPED]"
    CYCLE_FAILED = "[CYCLE FAILED]"
    ARCHIVED = "[ARCHIVED]"
    INBOX = "[INBOX]"
    WAKE = "[WAKE]"  # what the wake_when command printed: why this cycle runs (agent/idle.py)
    INTERRUPTED = "[INTERRUPTED]"  # a call with side effects a killed cycle left unfinished (agent/journal.py)

    def line(self, text: str) -> str:
        return f"{self.value} {text}" if text else self.value

    @classmethod
    def of(cls, line: str) -> tuple["Tag | None", str]:
        """(tag, rest of the line) for a note line; (None, line) when it carries no tag."""
        if line.startswith("["):
            for tag in cls:
                if line.startswith(tag.value):
                    return tag, line[len(tag.value):].lstrip()
        return None, line

    @property
    def is_error(self) -> bool:
        return self in (Tag.PARSE_ERROR, Tag.UNKNOWN_TOOL, Tag.TOOL_ERROR, Tag.CHECK_FAILED)
