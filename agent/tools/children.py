"""Commands the tools start never outlive the agent, even when it is killed with SIGKILL.

Two layers, because neither is enough alone:
- `die_with_parent` (the child's preexec_fn, Linux only): the kernel sends the command SIGKILL
  when the agent dies however it dies. It reaches the command itself, not what the command
  started in the background.
- A record per running command's process group in logs/.running/<pgid>.json (the group id and
  the leader's start time from /proc): written before the command runs, removed when it ends.
  A record still there at the start of the next cycle means the agent was killed; `reap_recorded`
  then kills what is left of that group. The start time and the session id keep a reused pid
  from being killed: a pid cannot be reused while a process of its group or session lives.
  An MCP server's launcher writes such a record too (`mcp-<agent pid>-<n>.json`, naming the agent
  that owns it, so the sweep leaves alone the servers of an `agent tools` or `doctor` still
  running), and the agent ends the server's whole group with `end_recorded_group` when its session
  closes, whatever the leader did: a helper it forked and left running goes with it.

Nor is what a child writes ever held whole: `OutputTail` is a pipe whose reader keeps only the
first or the last few KiB (a hook's or `wake_when`'s output, an MCP server's stderr), read as it
comes so a full pipe never blocks the child, and never written to a file that could fill a disk;
`wait_draining` waits for a child's end while reading its output so.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import sys
from pathlib import Path

from agent.common.safe_yaml import open_regular_file

PR_SET_PDEATHSIG = 1
RECORDS = Path("logs") / ".running"


@functools.lru_cache(maxsize=None)
def _load_prctl():
    """libc's prctl, looked up once, when the first command starts (ctypes stays off a cycle that runs none)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def die_with_parent(parent_pid: int):
    """A preexec_fn that has the kernel SIGKILL the child when `parent_pid` dies (a no-op where
    prctl is unavailable; the group record still covers it)."""
    prctl = _load_prctl()  # resolved here, in the parent: the child only calls it

    def preexec() -> None:
        if prctl is None:
            return
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat from field 3 (state) on; None when there is no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


def _start_time(pid: int) -> str | None:
    fields = _stat_fields(pid)
    return fields[19] if fields else None  # field 22, starttime


def record_group(home: Path, pid: int) -> None:
    """Note a just-started command that leads its own session and group (`pid` = pgid = sid)."""
    folder = home / RECORDS
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{pid}.json").write_text(json.dumps({"pgid": pid, "start_time": _start_time(pid)}))
    except OSError:
        pass  # a read-only home: die_with_parent still covers the command itself


def forget_group(home: Path, pid: int) -> None:
    """The command's group is gone (it ended or was killed): drop its record."""
    try:
        (home / RECORDS / f"{pid}.json").unlink(missing_ok=True)
    except OSError:
        pass


def _recorded(path: Path) -> tuple[int | None, str | None, dict]:
    """(pgid, start time, the whole record) of a group record; (None, None, {}) when unreadable."""
    try:
        handle = open_regular_file(path)  # a FIFO or a link put there must not hold up a cycle
        if handle is None:
            return None, None, {}
        with handle:
            noted = json.loads(handle.read(4096))
        return int(noted["pgid"]), noted["start_time"], noted
    except (OSError, ValueError, KeyError, TypeError):  # FileRefused is a ValueError
        return None, None, {}


def _owner_alive(noted: dict) -> bool:
    """Whether the agent process that wrote the record (when it says) still runs."""
    owner = noted.get("owner")
    return isinstance(owner, int) and owner != os.getpid() and _start_time(owner) == noted.get("owner_start")


def reap_recorded(home: Path) -> list[int]:
    """Kill what is left of every group recorded by a killed agent; the pgids killed. Call
    while holding the home's lock, before any tool runs."""
    folder = home / RECORDS
    if not folder.is_dir():
        return []
    killed = []
    for path in sorted(folder.glob("*.json")):
        pgid, start_time, noted = _recorded(path)
        if _owner_alive(noted):
            continue  # another agent's (an `agent tools` or `doctor` running now): not left by a kill
        if pgid and pgid > 1 and _group_is_ours(pgid, start_time):
            try:
                os.killpg(pgid, signal.SIGKILL)
                killed.append(pgid)
            except (ProcessLookupError, PermissionError):
                pass
        path.unlink(missing_ok=True)
    return killed


def _group_is_ours(pgid: int, start_time: str | None) -> bool:
    """Whether group `pgid` is still the recorded one: its leader lives with the recorded start
    time, or the leader is gone and processes remain in its group and session (the number
    cannot have been reused while they live)."""
    leader_start = _start_time(pgid)
    if leader_start is not None:
        return leader_start == start_time
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields and fields[2] == str(pgid) and fields[3] == str(pgid):  # pgrp, session
                return True
    return False


def left_by_killed_agents(home: Path) -> dict[str, int]:
    """Per MCP server, how many processes of the groups its killed agents' sessions left are still
    running (the next cycle's `reap_recorded` ends them): what `doctor` reports."""
    left: dict[str, int] = {}
    folder = home / RECORDS
    for path in sorted(folder.glob("mcp-*.json")) if folder.is_dir() else []:
        pgid, start_time, noted = _recorded(path)
        if pgid and pgid > 1 and not _owner_alive(noted) and _group_is_ours(pgid, start_time):
            name = str(noted.get("server") or "?")
            left[name] = left.get(name, 0) + len(group_members(pgid))
    return {name: count for name, count in left.items() if count}


def owner_record() -> dict:
    """What a record written for this agent process says of its owner (see `_owner_alive`)."""
    return {"owner": os.getpid(), "owner_start": _start_time(os.getpid())}


def group_members(pgid: int) -> list[int]:
    """The live processes (not zombies) of process group `pgid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields and fields[2] == str(pgid) and fields[0] != "Z":
                found.append(int(entry.name))
    return found


def end_recorded_group(record: Path, grace: float = 2.0) -> int:
    """End whatever is left of the group the record at `record` names (SIGTERM, then SIGKILL after
    `grace` seconds) and drop the record; how many processes were left in it (0: none, or no record)."""
    import time

    pgid, start_time, _ = _recorded(record)
    left = group_members(pgid) if pgid and pgid > 1 and _group_is_ours(pgid, start_time) else []
    if left:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while group_members(pgid) and time.monotonic() < deadline:
            time.sleep(0.01)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        deadline = time.monotonic() + grace  # SIGKILL is delivered at once, acted on a moment later
        while group_members(pgid) and time.monotonic() < deadline:
            time.sleep(0.01)
    with contextlib.suppress(OSError):
        record.unlink(missing_ok=True)
    return len(left)


# ------------------------------------------------------------------------------ bounded output

TAIL_BYTES = 4096  # what an OutputTail keeps by default
READ_AT_ONCE = 1 << 20  # what one drain reads at most, so a child writing without end cannot hold the reader


class OutputTail:
    """A pipe for a child's output of which only `keep` bytes stay: the first (`head`) or the last."""

    def __init__(self, keep: int = TAIL_BYTES, head: bool = False):
        import threading  # here: only a command with output to keep needs it

        self.keep, self.head = keep, head
        self.kept, self.dropped = bytearray(), 0
        self.read_fd, self.write_fd = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        os.set_blocking(self.write_fd, True)  # the child's end blocks as a pipe does (until we read)
        self._lock = threading.Lock()
        self._writer = None

    def writer(self):
        """The write end as a text file (what a library that takes a stderr file wants)."""
        if self._writer is None:
            self._writer = os.fdopen(self.write_fd, "w", closefd=False)
        return self._writer

    def drain(self) -> bool:
        """Read what the pipe holds now (at most READ_AT_ONCE); False once every writer has closed it."""
        with self._lock:
            got = 0
            while got < READ_AT_ONCE:
                try:
                    chunk = os.read(self.read_fd, 65536)
                except BlockingIOError:
                    return True
                except OSError:  # closed
                    return False
                if not chunk:
                    return False
                got += len(chunk)
                self._feed(chunk)
            return True

    def _feed(self, chunk: bytes) -> None:
        if self.head:
            room = max(0, self.keep - len(self.kept))
            self.kept += chunk[:room]
            self.dropped += len(chunk) - min(room, len(chunk))
        else:
            self.kept += chunk
            if len(self.kept) > self.keep:
                self.dropped += len(self.kept) - self.keep
                del self.kept[: len(self.kept) - self.keep]

    def text(self) -> str:
        """What was kept, as text (what the pipe holds now read first)."""
        self.drain()
        return bytes(self.kept).decode("utf-8", "replace")

    def close_writer(self) -> None:
        """Close our copy of the write end once the child has its own."""
        if self.write_fd >= 0:
            if self._writer is not None:
                self._writer.close()
            os.close(self.write_fd)
            self.write_fd = -1

    def close(self) -> None:
        self.close_writer()
        if self.read_fd >= 0:
            os.close(self.read_fd)
            self.read_fd = -1


def wait_draining(process, tail: OutputTail, timeout: float) -> bool:
    """Wait at most `timeout` seconds for `process` to end, reading its output into `tail`
    meanwhile; True when it ended. What it wrote before it ended is read; a child it left behind
    holding the pipe does not hold this up."""
    import selectors
    import time

    deadline = time.monotonic() + timeout
    exited = os.pidfd_open(process.pid)  # readable once the process has ended (Linux 5.3)
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(exited, selectors.EVENT_READ, "exited")
            selector.register(tail.read_fd, selectors.EVENT_READ, "output")
            while (left := deadline - time.monotonic()) > 0:
                for key, _ in selector.select(left):
                    if key.data == "exited":
                        process.wait()
                        tail.drain()
                        return True
                    if not tail.drain():
                        selector.unregister(tail.read_fd)  # closed its output, still running
            return False
    finally:
        os.close(exited)
