"""The built-in tools, in the order the prompt lists them (each is a typed function, defined
in the module of its kind: shell, files, http)."""

from __future__ import annotations

from agent.tools.base import Tool, ToolContext
from agent.tools.files import append_file, list_dir, read_file, reading_precheck, write_file, writing_precheck
from agent.tools.http import http_get, http_precheck
from agent.tools.shell import allowed_argv, shell


def echo(ctx: ToolContext, message: str) -> str:
    """Return the message unchanged (a way to record something in notes).

    Args:
        message: the text to echo
    """
    return message


TOOLS = [
    Tool.from_function(echo, example={"message": "Hello!"}, side_effects=False),
    Tool.from_function(shell, example={"command": "date -u"}, precheck=allowed_argv),
    Tool.from_function(read_file, example={"path": "input.txt"}, precheck=reading_precheck, side_effects=False),
    Tool.from_function(write_file, example={"path": "hello.txt", "content": "hello"}, precheck=writing_precheck),
    Tool.from_function(
        append_file, example={"path": "journal.txt", "content": "checked the disk\n"}, precheck=writing_precheck
    ),
    Tool.from_function(list_dir, example={"path": "."}, precheck=reading_precheck, side_effects=False),
    # GET is a safe method (RFC 9110): fetching a page again changes nothing
    Tool.from_function(http_get, example={"url": "https://example.com/"}, precheck=http_precheck, side_effects=False),
]
