"""Note tags: the one definition every writer and reader of notes shares.

A note line starts with a tag, `[TOOL] echo({"message": "hi"}) -> hi`. Writers build lines with
`Tag.X.line(text)`; readers split them with `Tag.of(line)`. Nothing else spells a tag.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent.secrets import Secrets


class Tag(str, enum.Enum):
    """A note's tag; the tags the dispatcher's outcomes carry also name that kind of action (`action`)."""

    action: str | None  # the outcome's name in a cycle's `actions` counts and the progress display; None: no outcome

    def __new__(cls, text: str, action: str | None = None) -> "Tag":
        member = str.__new__(cls, text)
        member._value_ = text
        member.action = action
        return member

    TOOL = "[TOOL]", "tool"  # a registered tool ran
    UPDATE = "[UPDATE]", "update"  # update_scratchpad was applied
    COMPLETED = "[COMPLETED]", "done"  # done: the task queue advanced, the cycle ends
    PARSE_ERROR = "[PARSE ERROR]", "parse_error"
    UNKNOWN_TOOL = "[UNKNOWN TOOL]", "unknown_tool"
    TOOL_ERROR = "[TOOL ERROR]", "tool_error"
    CHECK_FAILED = "[CHECK FAILED]", "check_failed"  # done refused by the task's acceptance check
    APPROVAL = "[APPROVAL]", "parked"  # a gated tool's call, not run: parked for the operator (approvals.py)
    STOPPED = "[STOPPED]"
    CYCLE_FAILED = "[CYCLE FAILED]"
    ARCHIVED = "[ARCHIVED]"
    INBOX = "[INBOX]"
    WAKE = "[WAKE]"  # what the wake_when command printed: why this cycle runs (agent/cycle/idle.py)
    MEMORY = "[MEMORY]"  # what wake did to a section: a lowered limit applied, hand-written entries adopted
    INTERRUPTED = "[INTERRUPTED]"  # a call with side effects a killed cycle left unfinished (agent/cycle/journal.py)

    def line(self, text: str) -> str:
        return f"{self.value} {text}" if text else self.value

    @classmethod
    def of(cls, line: str) -> tuple["Tag | None", str]:
        """(tag, rest of the line) for a note line; (None, line) when it carries no tag."""
        if line.startswith("["):
            for tag in cls:
                if line.startswith(tag.value):
                    return tag, line[len(tag.value) :].lstrip()
        return None, line

    @property
    def is_error(self) -> bool:
        return self in (Tag.PARSE_ERROR, Tag.UNKNOWN_TOOL, Tag.TOOL_ERROR, Tag.CHECK_FAILED)


@dataclass(frozen=True)
class Outcome:
    """What one action did: its tag, the note line it leaves, and the call it was."""

    kind: Tag  # the note's tag: what happened (Tag.action names it in the counts)
    note: str
    tool: str | None = None
    args: Any = None
    result: str | None = None  # a tool that ran (Tag.TOOL): its result as the note shows it, after "-> "
    leaving: tuple = ()  # what it moved out of a memory section, for the archive (agent/store/archive.py Left)

    @property
    def done(self) -> bool:
        return self.kind is Tag.COMPLETED

    def redacted(self, secrets: Secrets) -> "Outcome":
        """This outcome as it may be shown (progress lines, cron mail)."""
        return dataclasses.replace(
            self,
            note=secrets.redact_text(self.note),
            tool=secrets.redact(self.tool),  # an unknown tool's name is whatever the model sent
            args=secrets.redact(self.args),
            result=secrets.redact(self.result),  # None stays None: redact leaves non-strings alone
            leaving=(),  # what left memory is the archive's, never shown
        )
