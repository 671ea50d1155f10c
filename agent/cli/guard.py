"""The last line of defence for the terminal: every command's stdout and stderr are wrapped so
that whatever is written passes `escape_output` (controls, line separators and bidi controls
escaped; newline, tab and click's colour sequences kept). Commands still escape model-written
fields themselves, onto one line each; this guard catches what one of them forgets."""

from __future__ import annotations

import io
import sys
from typing import Any

import click

from agent.common.escape import escape_output


class EscapingStream(io.TextIOBase):
    """A text stream that escapes what is written to it and passes it to `inner`."""

    def __init__(self, inner: Any):
        self.inner = inner

    def write(self, text: str) -> int:
        self.inner.write(escape_output(text))
        return len(text)

    def flush(self) -> None:
        self.inner.flush()

    def isatty(self) -> bool:
        return self.inner.isatty()

    def fileno(self) -> int:
        return self.inner.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.inner, "encoding", "utf-8")

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self.inner, "errors", None)


def raw(stream: Any) -> Any:
    """The stream under the guard: for rich's live display, which draws with escape sequences
    of its own (it escapes the model's text itself)."""
    return stream.inner if isinstance(stream, EscapingStream) else stream


def guard_output(ctx: click.Context) -> None:
    """Wrap stdout and stderr for the rest of this command; put them back when it closes."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = EscapingStream(raw(sys.stdout)), EscapingStream(raw(sys.stderr))

    def restore() -> None:
        sys.stdout, sys.stderr = saved

    ctx.call_on_close(restore)
