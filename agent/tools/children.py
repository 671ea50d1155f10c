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
"""

from __future__ import annotations

import functools
import json
import os
import signal
import sys
from pathlib import Path

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


def reap_recorded(home: Path) -> list[int]:
    """Kill what is left of every group recorded by a killed agent; the pgids killed. Call
    while holding the home's lock, before any tool runs."""
    folder = home / RECORDS
    if not folder.is_dir():
        return []
    killed = []
    for path in sorted(folder.glob("*.json")):
        try:
            noted = json.loads(path.read_text())
            pgid, start_time = int(noted["pgid"]), noted["start_time"]
        except (OSError, ValueError, KeyError, TypeError):
            pgid = None
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
