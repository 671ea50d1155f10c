"""The built-in tools, in the order the prompt lists them (each is a typed function, defined
in the module of its kind: shell, files, http)."""

from __future__ import annotations

from .base import Tool, ToolContext
from .files import append_file, list_dir, read_file, write_file
from .http import http_get
from .shell import shell


def echo(ctx: ToolContext, message: str) -> str:
    """Return the message unchanged (a way to record something in notes).

    Args:
        message: the text to echo
    """
    return message


TOOLS = [
    Tool.from_function(echo, example={"message": "Hello!"}, side_effects=False),
    Tool.from_function(shell, example={"command": "date -u"}),
    Tool.from_function(read_file, example={"path": "input.txt"}, side_effects=False),
    Tool.from_function(write_file, example={"path": "hello.txt", "content": "hello"}),
    Tool.from_function(append_file, example={"path": "journal.txt", "content": "checked the disk\n"}),
    Tool.from_function(list_dir, example={"path": "."}, side_effects=False),
    # GET is a safe method (RFC 9110): fetching a page again changes nothing
    Tool.from_function(http_get, example={"url": "https://example.com/"}, side_effects=False),
]
