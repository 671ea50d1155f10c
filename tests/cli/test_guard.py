"""The terminal's last line of defence (agent/cli/guard.py): whatever a command writes passes
escape_output, so a forgotten field cannot drive the terminal; newlines, tabs and click's own
colours still get through."""

from __future__ import annotations

import io
import sys

import click

from agent.cli.guard import EscapingStream, guard_output, raw


def test_what_is_written_is_escaped_but_newlines_tabs_and_click_styles_pass():
    inner = io.StringIO()
    stream = EscapingStream(inner)
    styled = click.style("ok", fg="green")
    text = f"a\tb\n{styled} \x1b]0;title\x07 \x1b[2J \u202eevil \x9b"
    assert stream.write(text) == len(text)  # the caller's count, not the escaped one
    shown = inner.getvalue()
    assert shown.startswith("a\tb\n" + styled + " ")
    assert "\x1b]" not in shown and "\x07" not in shown and "\x1b[2J" not in shown
    assert "\u202e" not in shown and "\x9b" not in shown


def test_the_stream_passes_on_what_callers_ask_of_a_file():
    inner = io.TextIOWrapper(io.BytesIO(), encoding="latin-1", errors="replace")
    stream = EscapingStream(inner)
    assert stream.writable() and not stream.isatty()
    assert stream.encoding == "latin-1" and stream.errors == "replace"
    stream.write("x")
    stream.flush()
    assert inner.buffer.getvalue() == b"x"


def test_raw_unwraps_the_guard_and_leaves_any_other_stream():
    inner = io.StringIO()
    assert raw(EscapingStream(inner)) is inner and raw(inner) is inner


def test_guard_output_wraps_both_streams_once_and_puts_them_back_on_close():
    before = sys.stdout, sys.stderr
    ctx = click.Context(click.Command("x"))
    with ctx:
        guard_output(ctx)
        guard_output(ctx)  # twice: still one layer
        assert isinstance(sys.stdout, EscapingStream) and isinstance(sys.stderr, EscapingStream)
        assert raw(sys.stdout) is before[0] and raw(sys.stderr) is before[1]
    assert (sys.stdout, sys.stderr) == before
