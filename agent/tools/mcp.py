"""Tools from Model Context Protocol servers, under the same policy as the built-in tools.

config.yaml's `mcp_servers` names each server (command, args, env, optional tools_enabled).
`McpServers` starts them over stdio with the official `mcp` SDK for one cycle (or one `agent
tools` / `agent doctor`) and stops them when that ends, however it ends: its owner uses it as a
context manager, and an atexit hook stops any still running. The SDK is asyncio and the cycle is
not, so the sessions live in one background thread running its own event loop; each MCP tool is
a plain blocking function that hands its call to that loop and waits at most `mcp_timeout`.

The same policy as for built-ins:
- names: `<server>__<tool>`, squeezed into the tool-name pattern, so they cannot collide with
  built-ins; tools_enabled / tools_disabled use those names;
- arguments: the server's input schema, reduced to the JSON-schema subset our checks read (what
  they cannot read is dropped: a looser check, never a crash); the server checks the rest;
- environment: a short allowlist of the agent's (PATH, HOME, the locale, TZ: mcp_convert's
  SERVER_ENV_ALLOWLIST, never a secret), plus the server's own `env` from config.yaml;
- lifetime: each server leads a process group of its own (the SDK starts it in a new session),
  noted in logs/.running/ by its launcher; when its session closes, the whole group is ended,
  whatever the leader did (a helper it forked and left running goes too), and `outlived` says
  which servers had left processes behind; on Linux the kernel kills a server whose agent died by
  SIGKILL (mcp_convert), and the next cycle's sweep kills what is left of its group (children.py);
- results: text joined, capped, and redacted of secret values (the cycle's, and those handed to
  the server in its `env`) before anyone sees them;
- failure: a server that does not start is a problem (the cycle notes it); one that exits
  mid-cycle turns calls to its tools into a ToolError; the cycle goes on with the other tools.
  Its stderr goes through a pipe the event loop reads as it comes, keeping the last few KiB
  (agent/tools/children.py): a server printing gigabytes before it crashes costs neither memory
  nor disk.
- output: its stdout reaches the SDK through `BoundedStdout`, which holds at most
  `MAX_MESSAGE_BYTES` of one line: a longer message is refused as it is read (never held whole;
  the call it answers gets an error), and so is a message listing more than `MAX_LISTED_TOOLS`
  tools, before it is parsed (parsing costs per tool); a line that is not a JSON-RPC message
  (noise: logging on the wrong stream) is counted and kept as a short tail, never parsed, so it
  costs no traceback; a page of a tools/list past `MAX_LISTED_TOOLS` leaves the server out too.

Only this module imports `mcp` (and with it anyio, pydantic, httpx), and only when servers are
configured.
"""

from __future__ import annotations

import asyncio
import atexit
import builtins
import collections
import concurrent.futures
import contextvars
import functools
import json
import logging
import os
import re
import threading
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.common.extras import install_hint
from agent.secrets import Secrets
from agent.tools.base import Tool, ToolContext, ToolError
from agent.tools.children import RECORDS, OutputTail, end_recorded_group
from agent.tools.mcp_convert import (
    MAX_DESCRIPTION_CHARS,
    args_schema_of,
    launch_command,
    one_line,
    result_text,
    server_base_env,
    server_env,
    tool_name,
)

MAX_TOOLS_PER_SERVER = 64
MAX_LISTED_TOOLS = 1_000  # a server listing more is left out: nobody offers a model that many
MAX_MESSAGE_BYTES = 4 * 1024 * 1024  # one message from a server, at most (a result is cut to 64 KB after)
TOOL_COUNT_FROM_BYTES = 64 * 1024  # a message this long is checked for a tool list past MAX_LISTED_TOOLS
NOISE_TAIL_LINES, NOISE_LINE_CHARS = 5, 200  # what is kept of the non-protocol lines on a server's stdout
MAX_SCHEMA_CHARS = 20_000  # a tool's argument schema goes into every prompt
MAX_LIST_PAGES = 10
STDERR_TAIL_CHARS = 160  # the end of a traceback; notes clip a tool error at note_result_chars
# How long close() waits for the SDK to stop a server (close stdin, 2 s, SIGTERM, 2 s, SIGKILL).
STOP_WAIT = 10.0
# Beyond the timeouts the event loop enforces itself: only a wedged loop runs this out.
CALL_SLACK = 5.0
_CONNECTION_CLOSED = -32000  # the JSON-RPC code the SDK raises when the server's pipe closes
_EXCEPTION_GROUP = getattr(builtins, "BaseExceptionGroup", ())


def _root_cause(exc: BaseException) -> BaseException:
    """The first real error inside the exception groups anyio's task groups wrap errors in."""
    while isinstance(exc, _EXCEPTION_GROUP) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


@dataclass
class _Server:
    """One configured server and its connection, while it lasts."""

    name: str
    spec: dict
    secrets: Secrets  # the cycle's, plus this server's env values that are secrets
    errlog: OutputTail = field(default_factory=OutputTail)  # the last few KiB of its stderr, never more
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    session: Any = None
    serving: concurrent.futures.Future | None = None
    exited: str | None = None  # why the connection ended, once it has
    record: Path | None = None  # its process group's record (children.py), once its launcher wrote it
    noise: int = 0  # non-protocol lines on its stdout
    noise_tail: collections.deque = field(default_factory=lambda: collections.deque(maxlen=NOISE_TAIL_LINES))
    refused: int = 0  # messages over MAX_MESSAGE_BYTES

    def stderr_tail(self) -> str:
        tail = self.errlog.text()[-STDERR_TAIL_CHARS:]
        return f"; its stderr ends: {one_line(tail, STDERR_TAIL_CHARS)}" if tail.strip() else ""


_open_hubs: "weakref.WeakSet[McpServers]" = weakref.WeakSet()
_spawning: contextvars.ContextVar[_Server | None] = contextvars.ContextVar("mcp_server_spawning", default=None)
_ID_NEAR_THE_START = re.compile(rb'"id"\s*:\s*(-?\d+|"[^"\\]{0,64}")')


class BoundedStdout:
    """A server's stdout as the SDK reads it (`receive`, `aclose`), one line held at most
    MAX_MESSAGE_BYTES long: what passes is whole JSON-RPC lines. A longer line is dropped as it
    comes (only its first bytes are kept, to answer the request it answers with an error); a line
    that is not a JSON object is noise, counted on the server and kept as a short tail."""

    def __init__(self, stream: Any, server: _Server, limit: int = MAX_MESSAGE_BYTES):
        self._stream, self._server, self._limit = stream, server, limit
        self._line, self._head, self._over = bytearray(), b"", False

    async def receive(self, max_bytes: int = 65536) -> bytes:
        while True:  # EndOfStream from the pipe ends the SDK's reader
            passed = self.feed(await self._stream.receive(max_bytes))
            if passed:
                return passed

    async def aclose(self) -> None:
        await self._stream.aclose()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def feed(self, chunk: bytes) -> bytes:
        """What of `chunk` goes on to the SDK: whole lines, each within the limit."""
        passed, start = bytearray(), 0
        while (newline := chunk.find(b"\n", start)) != -1:
            self._add(chunk[start:newline])
            passed += self._line_ended()
            start = newline + 1
        self._add(chunk[start:])
        return bytes(passed)

    def _add(self, piece: bytes) -> None:
        if self._over:
            return
        self._line += piece
        if len(self._line) > self._limit:
            self._over, self._head = True, bytes(self._line[:256])
            self._line.clear()

    def _line_ended(self) -> bytes:
        line, over, head = bytes(self._line).strip(), self._over, self._head
        self._line.clear()
        self._over, self._head = False, b""
        if over:
            self._server.refused += 1
            return _refusal(head, f"was over {self._limit >> 20} MiB")
        if line.startswith(b"{") and line.endswith(b"}"):
            # Parsing costs far more per tool than per byte: a long list is refused before it is parsed.
            # '"inputSchema"' counts tool entries: inside a JSON string every quote is escaped.
            if len(line) > TOOL_COUNT_FROM_BYTES and line.count(b'"inputSchema"') > MAX_LISTED_TOOLS:
                self._server.refused += 1
                return _refusal(line[:256], f"lists more than {MAX_LISTED_TOOLS:,} tools")
            return line + b"\n"
        if line:
            self._server.noise += 1
            self._server.noise_tail.append(line[:NOISE_LINE_CHARS].decode("utf-8", "replace"))
        return b""


def _refusal(head: bytes, why: str) -> bytes:
    """The error answering the request a refused message answered, when its first bytes name its id."""
    found = _ID_NEAR_THE_START.search(head)
    if found is None:
        return b""  # a notification, or an id past the start: the call waits out mcp_timeout
    error = {"code": -32603, "message": f"the server's message {why}: refused unread"}
    return json.dumps({"jsonrpc": "2.0", "id": json.loads(found.group(1)), "error": error}).encode() + b"\n"


class _QuietStdioLog(logging.Filter):
    """The SDK logs a traceback per stdout line it cannot parse: the noise is counted instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        server = _spawning.get()
        if server is not None and record.getMessage().startswith("Failed to parse JSONRPC message"):
            server.noise += 1
            return False
        return True


def _bound_server_output() -> str | None:
    """Once: every server the SDK starts (from a `_serve` task) reads through BoundedStdout. The
    SDK has no hook for its reader, so its spawning function is wrapped; an SDK without it is a
    problem said aloud (its servers' output unbounded), never silently."""
    import mcp.client.stdio as stdio

    if getattr(stdio, "_agent_bounded", False):
        return None
    spawn = getattr(stdio, "_create_platform_compatible_process", None)
    if spawn is None:
        return "this mcp SDK starts servers in a way this agent cannot bound: their output is read unbounded"

    async def bounded_spawn(*args: Any, **kwargs: Any) -> Any:
        process = await spawn(*args, **kwargs)
        server = _spawning.get()
        if server is not None and getattr(process, "_stdout", None) is not None:
            process._stdout = BoundedStdout(process._stdout, server)
        return process

    stdio._create_platform_compatible_process = bounded_spawn
    stdio._agent_bounded = True
    logging.getLogger(stdio.__name__).addFilter(_QuietStdioLog())
    return None


@atexit.register
def _stop_all_at_exit() -> None:
    for hub in list(_open_hubs):
        hub.close()


class McpServers:
    """The configured MCP servers, started for the duration of a `with` block.

    After start: `tools` are the offered tools (server policy applied), `problems` say which
    servers or tools were left out and why, `failed` maps a server that did not start to why.
    """

    def __init__(self, ctx: ToolContext):
        self.ctx = ctx
        self.timeout = ctx.settings.mcp_timeout
        self.start_timeout = ctx.settings.mcp_start_timeout
        self.tools: list[Tool] = []
        self.problems: list[str] = []
        self.failed: dict[str, str] = {}
        self.outlived: dict[str, int] = {}  # server -> processes of its group still running when its session closed
        self._servers = {name: _Server(name, spec, ctx.secrets) for name, spec in ctx.settings.mcp_servers.items()}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp-servers", daemon=True)
        self._closed = False

    def __enter__(self) -> "McpServers":
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def tools_for_registry(self, reserved: list[str]) -> tuple[list[Tool], list[str]]:
        """(tools whose names are free, problems): a name already taken (by a plugin) skips the MCP tool."""
        taken = set(reserved)
        clashes = [
            f"MCP tool '{tool.name}' skipped: a tool with that name already exists"
            for tool in self.tools
            if tool.name in taken
        ]
        return [tool for tool in self.tools if tool.name not in taken], self.problems + clashes

    # ------------------------------------------------------------------------------ lifetime

    def start(self) -> None:
        """Start every server at once and wait (at most mcp_start_timeout) for each one's tool list."""
        try:
            from mcp import ClientSession, StdioServerParameters
            from mcp.client.stdio import stdio_client
        except ImportError as exc:
            for server in self._servers.values():
                self._fail(
                    server,
                    f"the mcp package is not installed ({exc}); install it with: {install_hint('mcp')}",
                )
            return
        unbounded = _bound_server_output()
        if unbounded:
            self.problems.append(unbounded)
        _open_hubs.add(self)
        self._thread.start()
        base_env = server_base_env(self.ctx.child_env())  # an allowlist; the server's `env` adds to it
        waiting = {}
        records = self._records_folder()
        for n, server in enumerate(self._servers.values()):
            server.record = records / f"mcp-{os.getpid()}-{n}.json" if records else None
            try:
                own_env, own_secrets = server_env(server.spec, self.ctx.settings)
                server.secrets = Secrets((*self.ctx.secrets.values, *own_secrets), self.ctx.secrets.names)
                env = {**base_env, **own_env}
                argv = launch_command(
                    server.spec["command"], server.spec.get("args", []), env, self.ctx.home, server.record, server.name
                )
            except ToolError as exc:
                self._fail(server, str(exc))
                continue
            params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=str(self.ctx.home))
            ready: concurrent.futures.Future = concurrent.futures.Future()
            self._loop.call_soon_threadsafe(self._loop.add_reader, server.errlog.read_fd, server.errlog.drain)
            serve = self._serve(server, stdio_client(params, errlog=server.errlog.writer()), ClientSession, ready)
            server.serving = asyncio.run_coroutine_threadsafe(serve, self._loop)
            waiting[server.name] = ready
        for name, ready in waiting.items():
            server = self._servers[name]
            try:
                listing = ready.result(timeout=self.start_timeout + CALL_SLACK)
            except concurrent.futures.TimeoutError:
                self._fail(server, self._why(server, TimeoutError()))
                continue
            except Exception as exc:
                self._fail(server, self._why(server, exc))
                continue
            self._add_tools(server, listing)

    def _records_folder(self) -> Path | None:
        folder = Path(self.ctx.home) / RECORDS
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            return None  # a read-only home: the kernel still kills each server with the agent
        return folder

    def close(self) -> None:
        """Stop every server (the SDK closes stdin, then terminates the process group if the leader
        does not exit), end what is left of each server's group, and stop the loop."""
        if self._closed:
            return
        self._closed = True
        serving = [s.serving for s in self._servers.values() if s.serving is not None]
        if self._thread.is_alive():
            for server in self._servers.values():
                self._loop.call_soon_threadsafe(server.stop.set)
            _, stuck = concurrent.futures.wait(serving, timeout=STOP_WAIT)
            for future in stuck:  # cancelling the task still runs the SDK's shielded process kill
                future.cancel()
            concurrent.futures.wait(stuck, timeout=STOP_WAIT)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(STOP_WAIT)
        if not self._thread.is_alive():
            self._loop.close()
        for server in self._servers.values():
            left = end_recorded_group(server.record) if server.record is not None else 0
            if left:
                self.outlived[server.name] = left
            server.errlog.close()
        _open_hubs.discard(self)

    async def _serve(
        self, server: _Server, transport: Any, session_class: Any, ready: concurrent.futures.Future
    ) -> None:
        """One server's whole connection, in one task (anyio's scopes must open and close in one)."""
        _spawning.set(server)  # this task's context: the SDK's tasks for this server inherit it
        try:
            async with transport as (read, write), session_class(read, write) as session:
                listing = await asyncio.wait_for(self._list_tools(session), self.start_timeout)
                server.session = session
                ready.set_result(listing)
                await server.stop.wait()
        except BaseException as exc:
            server.exited = f"exited: {self._why(server, exc)}"
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(server.exited))
            if not isinstance(exc, Exception):
                raise
        finally:
            server.session = None

    @staticmethod
    async def _list_tools(session: Any) -> list[dict]:
        from mcp.types import PaginatedRequestParams

        await session.initialize()
        listed, cursor, count = [], None, 0
        for _ in range(MAX_LIST_PAGES):
            page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
            count += len(page.tools)
            if count > MAX_LISTED_TOOLS:
                raise ValueError(f"it lists more than {MAX_LISTED_TOOLS:,} tools")
            room = MAX_TOOLS_PER_SERVER - len(listed)
            listed += [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in page.tools[:room]]
            cursor = page.next_cursor
            if not cursor or len(listed) >= MAX_TOOLS_PER_SERVER:
                break
        return listed

    def noise_lines(self) -> list[str]:
        """For the cycle log: per server, the lines of noise on its stdout and the messages refused."""
        lines = []
        for server in self._servers.values():
            if server.noise:
                tail = " | ".join(server.noise_tail)
                lines.append(
                    server.secrets.redact_text(
                        f"MCP server '{server.name}': {server.noise} lines of noise on its stdout "
                        f"(not JSON-RPC: dropped); the last: {one_line(tail, 600)}"
                    )
                )
            if server.refused:
                lines.append(
                    f"MCP server '{server.name}': {server.refused} message(s) refused unread "
                    f"(over {MAX_MESSAGE_BYTES >> 20} MiB, or a list of over {MAX_LISTED_TOOLS:,} tools)"
                )
        return lines

    # ---------------------------------------------------------------------------------- tools

    def _add_tools(self, server: _Server, listing: list[dict]) -> None:
        wanted = server.spec.get("tools_enabled")
        names = {tool.name for tool in self.tools}  # servers "my-s" and "my_s" share a prefix
        for listed in listing[:MAX_TOOLS_PER_SERVER]:
            remote = listed.get("name") if isinstance(listed, dict) else None
            if not isinstance(remote, str) or not remote:
                continue
            name = tool_name(server.name, remote)
            if wanted is not None and remote not in wanted and name not in wanted:
                continue
            schema = args_schema_of(listed.get("inputSchema"))
            problem = (
                "another MCP tool has the same name"
                if name in names
                else "its argument schema is too large"
                if len(json.dumps(schema)) > MAX_SCHEMA_CHARS
                else None
            )
            if problem:
                self.problems.append(
                    server.secrets.redact_text(f"MCP tool '{name}' of server '{server.name}' skipped: {problem}")
                )
                continue
            names.add(name)
            about = server.secrets.redact_text(one_line(listed.get("description") or "", MAX_DESCRIPTION_CHARS))
            call = functools.partial(self._call_tool, server.name, remote)
            hints = listed.get("annotations")
            read_only = isinstance(hints, dict) and hints.get("readOnlyHint") is True  # the server says so
            self.tools.append(
                Tool(
                    name,
                    about or f"Tool '{remote}' of MCP server {server.name}.",
                    schema,
                    call,
                    source=f"mcp:{server.name}",
                    side_effects=not read_only,
                )
            )

    def _call_tool(self, server_name: str, remote: str, _ctx: ToolContext, /, **args: Any) -> str:
        """Call one tool, waiting at most mcp_timeout; the result redacted, any failure a ToolError."""
        server = self._servers[server_name]
        if server.exited or server.session is None or self._closed:
            raise ToolError(
                server.secrets.redact_text(f"MCP server '{server_name}' is not running: {server.exited or 'stopped'}")
            )
        call = asyncio.wait_for(server.session.call_tool(remote, args), self.timeout)
        future = asyncio.run_coroutine_threadsafe(call, self._loop)
        try:
            result = future.result(timeout=self.timeout + CALL_SLACK)
        except (concurrent.futures.TimeoutError, asyncio.TimeoutError):
            future.cancel()
            raise ToolError(
                f"MCP server '{server_name}' did not answer within {self.timeout:g}s (mcp_timeout)"
            ) from None
        except Exception as exc:
            cause = _root_cause(exc)
            if getattr(cause, "code", None) == _CONNECTION_CLOSED:
                server.exited = f"exited during the cycle{server.stderr_tail()}"
                raise ToolError(server.secrets.redact_text(f"MCP server '{server_name}' {server.exited}")) from None
            raise ToolError(server.secrets.redact_text(f"MCP call failed: {type(cause).__name__}: {cause}")) from None
        except BaseException:  # an interrupt: the call is abandoned, the cycle's exit stops the server
            future.cancel()
            raise
        data = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        text = server.secrets.redact_text(result_text(data))
        if data.get("isError"):
            raise ToolError(text or "the MCP tool reported an error")
        return text

    # ------------------------------------------------------------------------------- problems

    def _fail(self, server: _Server, why: str) -> None:
        self.failed[server.name] = server.secrets.redact_text(why)
        self.problems.append(
            f"MCP server '{server.name}' not started: {self.failed[server.name]} (its tools are not offered)"
        )

    def _why(self, server: _Server, exc: BaseException) -> str:
        """What went wrong with a server, for people: the error and the end of its stderr."""
        cause = _root_cause(exc)
        if isinstance(cause, (asyncio.TimeoutError, TimeoutError)):
            return f"did not list its tools within {self.start_timeout:g}s (mcp_start_timeout){server.stderr_tail()}"
        if isinstance(cause, asyncio.CancelledError):
            return "stopped"
        return f"{type(cause).__name__}: {cause}{server.stderr_tail()}"
