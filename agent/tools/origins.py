"""Where what the model read came from: the runtime's record of each tool result's origin, as the
dispatcher runs each tool, so a memory entry the model writes can say what it had read before it.

An origin is a small mapping built from the tool the runtime ran and its checked arguments, never
from anything the model or a tool says about itself:

    {"origin": "operator", "input": "task"}       the task, queue and goals the cycle woke with, when
                                                  a task of the queue or a goal is not the model's own
    {"origin": "model", "input": "task"}          a task of the queue or a goal the model itself wrote
                                                  there (its provenance row's route: model or reflect)
    {"origin": "workspace", "path": P}            a workspace file (read_file) or folder (list_dir) the
                                                  model's file tools did not write, or that changed since
    {"origin": "workspace", "path": P, "written_in": CYCLE, "written_after": [...]}
                                                  a file holding exactly the bytes the model's file tools
                                                  last wrote there (agent/store/provenance.py
                                                  `model_wrote`), with the origins it had read before it
    {"origin": "http", "host": H}                 http_get: the URL's host, and each host it was
                                                  redirected to (agent/tools/http.py counts those)
    {"origin": "mcp", "server": NAME}             a tool of the MCP server config names NAME
    {"origin": "shell"}                           a shell command's output
    {"origin": "archive"}                         recall: what memory archived
    {"origin": "plugin", "tool": NAME}            a plugin's tool

`echo` brings nothing in. An origin is counted once per cycle, in the order first read, at most
MAX_ORIGINS of them (then `{"origin": "more", "count": N}`; past the bound, an origin of a kind not
listed yet still is, one of each kind), each text in it at most MAX_ORIGIN_CHARS, so a record stays small.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable
from urllib.parse import urlsplit

MAX_ORIGINS = 20
MAX_ORIGIN_CHARS = 256  # each text of an origin (a path, a host: the model names them) is cut there, with "…"
OPERATOR_TASK = {"origin": "operator", "input": "task"}
MODELS_TASK = {"origin": "model", "input": "task"}  # a task of the queue the model wrote there itself
_FILE_READERS = ("read_file", "list_dir")
_FILE_WRITERS = ("write_file", "append_file")
_OWN = {"echo": None, "shell": {"origin": "shell"}, "recall": {"origin": "archive"}}


class Origins:
    """What the model read in one cycle, in order, and how much of it it had read when each memory
    entry it wrote first appeared. `keys(state)`: the set of entry keys a state holds (by section and
    id, or by text for plain entries: agent/store/provenance.py)."""

    def __init__(
        self, home: Any, cycle_id: str, keys: Callable[[dict], set], operator: bool = True, own_task: bool = False
    ):
        self.home, self.cycle_id, self.keys = home, cycle_id, keys
        self.read: list[dict] = [dict(OPERATOR_TASK)] if operator else []
        self.read += [dict(MODELS_TASK)] if own_task else []
        self.more = 0
        self.seen_at: dict[Any, tuple[int, int]] = {}  # key -> (origins read, more left out) when first written

    @staticmethod
    def _kept(step: Callable[[], Any]) -> Any:
        """`step()`, a read or write of agent.db; None when it fails (a full disk midway: a misshapen
        table stops the cycle at wake, agent/store/provenance.py `check_tables`). Never the tool's
        failure, and the record errs on the safe side: a write not kept reads as not the model's own."""
        from agent.common.outcomes import AgentError

        try:
            return step()
        except AgentError:
            return None

    def ran(self, tool: Any, args: dict, workspace: Path | None) -> None:
        """The dispatcher runs `tool` with `args` (checked): count where its result comes from."""
        self.add(origin_of(tool, args, self.home, workspace))

    def add(self, found: dict | None) -> None:
        """Count one more origin (a tool's own, such as a host an http_get was redirected to)."""
        found = None if found is None else {key: _clipped(value) for key, value in found.items()}
        if found is None or found in self.read:
            return
        if len(self.read) >= MAX_ORIGINS and _kind_listed(found, self.read):  # a new kind is always listed
            self.more += 1
            return
        self.read.append(found)

    def so_far(self, upto: tuple[int, int] | None = None) -> list[dict]:
        """The origins read (`upto`: the first N of them and M left out by then), with the count of
        those left out, if any: an origin past the bound is never unsaid."""
        read, more = (self.read, self.more) if upto is None else (self.read[: upto[0]], upto[1])
        return read + ([{"origin": "more", "count": more}] if more else [])

    def written(self, before: dict, after: dict) -> None:
        """An update the dispatcher applied took `before` to `after`: each entry key new in it was
        written with what had been read by now (the first time it appeared counts)."""
        for key in self.keys(after) - self.keys(before):
            self.seen_at.setdefault(key, (len(self.read), self.more))

    def before(self, key: Any) -> list[dict] | None:
        """The origins read before the model's update first wrote `key`; None: no update of this
        cycle's loop wrote it."""
        upto = self.seen_at.get(key)
        return None if upto is None else self.so_far(upto)

    def wrote_file(self, path: str, data: bytes, kept: dict | None = None) -> None:
        """The model's file tool wrote `data` at workspace `path`: recorded with what it had read, one
        level deep (a file of its own it had read counts with what that one was written after), so
        copying through any number of files keeps the first origin and the record stays bounded.
        `kept`: the origin of the bytes the write kept (append_file's old content, `file_origin`)."""
        from agent.store.provenance import record_write

        read = self.so_far() + ([kept] if kept is not None else [])
        self._kept(lambda: record_write(self.home, path, data, self.cycle_id, flattened(read)))

    def file_origin(self, target: Path, workspace: Path) -> dict:
        """Where the bytes now in the workspace file `target` came from, as a read of it would say."""
        return _workspace_origin("read_file", target.relative_to(workspace).as_posix(), self.home, workspace)


def _kind_listed(origin: dict, listed: list[dict]) -> bool:
    """Whether an origin of `origin`'s kind (http, workspace, ...) is listed already: past the bound,
    only those are counted as "more", so twenty junk files never hide that a page was read."""
    return any(item.get("origin") == origin.get("origin") for item in listed)


def _clipped(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_ORIGIN_CHARS:
        return value[: MAX_ORIGIN_CHARS - 1] + "…"
    return value


def flattened(read: list[dict]) -> list[dict]:
    """`read` with each origin's `written_after` listed beside it instead of inside it, each once, at
    most MAX_ORIGINS (then a count of the rest)."""
    flat: list[dict] = []
    more = 0
    for origin in read:
        inner = origin.get("written_after") if isinstance(origin.get("written_after"), list) else []
        for item in [{k: v for k, v in origin.items() if k != "written_after"}, *inner]:
            if item.get("origin") == "more":
                more += item.get("count", 0) if isinstance(item.get("count"), int) else 0
            elif item not in flat:
                if len(flat) < MAX_ORIGINS or not _kind_listed(item, flat):
                    flat.append(item)
                else:
                    more += 1
    return flat + ([{"origin": "more", "count": more}] if more else [])


def origin_of(tool: Any, args: dict, home: Any, workspace: Path | None) -> dict | None:
    """Where the result of `tool` called with `args` comes from (None: nothing from outside)."""
    if tool.source.startswith("mcp:"):
        return {"origin": "mcp", "server": tool.source[len("mcp:") :]}
    if tool.source != "built-in":
        return {"origin": "plugin", "tool": tool.name}
    if tool.name == "http_get":
        return {"origin": "http", "host": _host(args.get("url"))}
    if tool.name in _FILE_READERS:
        return _workspace_origin(tool.name, args.get("path", "."), home, workspace)
    if tool.name in _FILE_WRITERS:
        return None  # its result is the runtime's own line ("wrote N bytes")
    return dict(_OWN[tool.name]) if _OWN.get(tool.name) else None


def _host(url: Any) -> str:
    try:
        return ascii_host((urlsplit(url).hostname or "") if isinstance(url, str) else "")
    except ValueError:
        return ""


def ascii_host(host: str) -> str:
    """A host name in its ASCII form (IDNA, `xn--…`), so one that only looks like another (Cyrillic о
    for o) never reads as it; one IDNA cannot encode, escaped."""
    if host.isascii():
        return host
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return host.encode("ascii", "backslashreplace").decode("ascii")


def workspace_path(workspace: Path | None, path: Any) -> tuple[str, Path] | None:
    """(the path relative to the workspace, the file on disk) of a tool's `path` argument, resolved
    as the file tools resolve it; None when it is not inside the workspace."""
    if workspace is None or not isinstance(path, str):
        return None
    try:
        target = (workspace / path).resolve()
    except (OSError, ValueError, RuntimeError):
        return None
    if not target.is_relative_to(workspace):
        return None
    return target.relative_to(workspace).as_posix() or ".", target


def _workspace_origin(name: str, path: Any, home: Any, workspace: Path | None) -> dict:
    where = workspace_path(workspace, path)
    shown = where[0] if where else str(path)
    found = {"origin": "workspace", "path": shown}
    if name == "read_file" and where is not None and home is not None:
        from agent.store.provenance import model_wrote

        wrote = Origins._kept(lambda: model_wrote(home, where[0], where[1]))
        if wrote is not None:
            found.update(written_in=wrote["cycle_id"], written_after=wrote["after"])
    return found


def entry_keys(lists: Iterable[str], plain: Callable[[dict], set]) -> Callable[[dict], set]:
    """keys(state): (section, id) of the entries of the list sections named `lists`, and the plain
    entries' keys `plain(state)` gives."""
    names = tuple(lists)

    def keys(state: dict) -> set:
        found = plain(state)
        for name in names:
            for entry in state.get(name) or []:
                if isinstance(entry, dict) and isinstance(entry.get("id"), str):
                    found.add((name, entry["id"]))
        return found

    return keys
