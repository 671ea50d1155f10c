"""The embedded model's own process: llama.cpp's native code runs here, never in the cycle's.

A crash in the runtime (SIGSEGV from a build for another CPU, SIGABRT, an OOM kill) ends this
child only: the parent sees the pipe close, reads the signal from the exit status, and raises
ModelCrashed (a ModelError), so the cycle fails like any model error: exit 4, a failure note
naming the signal, the index record, the hook. The lock stays with the parent (a child gets no
inherited descriptor but its two pipes), and a new child starts for the next cycle.

The parent runs `Worker`; the child runs child.py (`python -m agent.models.local.child R W`).
Both sides speak JSON, one message per pipe write: the parent sends `{"op": ..., "args": [...]}`
(Settings and Request as their fields); the child answers any number of `{"log": line}` and
`{"notice": line}` (a log line the operator also sees: base.Notice) messages, then one
`{"reply": ...}` or `{"error": kind, "message": ...}`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Mapping

from agent.models.base import Log, ModelCrashed, ModelError, ModelTimeout, ModelUnavailable, Notice

# the ModelError kinds a child may report; anything else it reports is a plain ModelError
_ERRORS = {kind.__name__: kind for kind in (ModelError, ModelUnavailable, ModelTimeout)}
STDERR_TAIL = 2000  # bytes of the child's stderr copied to the cycle log when it dies
PORTABLE_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF"  # as the README's set-up command builds it


def rebuild_command() -> str:
    """The command that rebuilds the installed llama-cpp-python portable (docs/reference.md, "The embedded model's build")."""
    try:
        version = "==" + importlib.metadata.version("llama-cpp-python")
    except importlib.metadata.PackageNotFoundError:
        version = ""
    return (
        f'CMAKE_ARGS="{PORTABLE_CMAKE_ARGS}" pip install --no-cache-dir --force-reinstall --no-deps '
        f"'llama-cpp-python{version}'"
    )


CRASH_FIX = "a llama-cpp-python built for another CPU? `agent doctor` names the fix"


def _fields(value: Any) -> Any:
    """A Settings or Request as its fields (the child rebuilds it); anything else as it is."""
    return dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value


def death(code: int) -> str:
    """How a child with exit status `code` (Popen.returncode) ended, in words."""
    if code >= 0:
        return f"exited with status {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    why = {
        "SIGKILL": " (killed: out of memory, or by someone)",
        "SIGSEGV": f" ({CRASH_FIX})",
        "SIGILL": f" ({CRASH_FIX})",
        "SIGABRT": " (llama.cpp aborted; the cycle log has its message)",
    }
    return f"died of {name}{why.get(name, '')}"


class Worker:
    """The parent's side: one child process running a LocalRuntime."""

    def __init__(self, log: Log, env: Mapping[str, str]):
        """Start the child with environment `env` (the caller leaves the secrets out)."""
        self.log = log
        self.stderr = tempfile.TemporaryFile()  # llama.cpp's own messages; its tail is logged on a death
        to_child, from_parent = os.pipe()
        to_parent, from_child = os.pipe()
        package_root = str(Path(__file__).resolve().parents[2])  # the child imports this same `agent`
        env = dict(env, PYTHONPATH=os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p))
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "agent.models.local.child", str(to_child), str(from_child)],
                pass_fds=(to_child, from_child),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=self.stderr,
                stderr=self.stderr,
            )
        finally:
            os.close(to_child)
            os.close(from_child)
        self.send, self.receive = Connection(from_parent, readable=False), Connection(to_parent, writable=False)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def call(self, op: str, *args: Any, timeout: float | None = None) -> Any:
        """Run `op` in the child; its reply, or its ModelError raised here; ModelCrashed if it died.
        With `timeout`, a child that has not answered by then is killed: ModelTimeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            self.send.send_bytes(json.dumps({"op": op, "args": [_fields(arg) for arg in args]}).encode())
            while True:
                if deadline is not None and not self.receive.poll(max(0.0, deadline - time.monotonic())):
                    self.proc.kill()
                    self.close()
                    raise ModelTimeout(
                        f"the embedded model gave no reply in the {timeout:.1f}s left; its process was stopped"
                    )
                message = json.loads(self.receive.recv_bytes())
                if "log" in message:
                    self.log(str(message["log"]))
                elif "notice" in message:
                    self.log(Notice(str(message["notice"])))
                else:
                    break
        except (EOFError, OSError):
            raise self._died() from None
        if "error" in message:
            raise _ERRORS.get(message["error"], ModelError)(str(message.get("message")))
        return message["reply"]

    def _died(self) -> ModelCrashed:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)  # its own exit status, before _end's kill could stand in for it
        self._end()
        with contextlib.suppress(OSError, ValueError):
            self.stderr.seek(max(0, self.stderr.seek(0, os.SEEK_END) - STDERR_TAIL))
            tail = self.stderr.read().decode("utf-8", errors="replace").strip()
            if tail:
                self.log(f"the embedded model's process wrote before it ended:\n{tail}")
        self.close()
        return ModelCrashed(f"the embedded model's process (pid {self.proc.pid}) {death(self.proc.returncode)}")

    def _end(self) -> None:
        """Close the pipes and end the child. Between calls it holds nothing worth finishing (the
        prompt cache is saved within a call), so it is killed rather than waited for."""
        for end in (self.send, self.receive):
            with contextlib.suppress(OSError):
                end.close()
        with contextlib.suppress(OSError):
            self.proc.kill()  # a child that already died keeps its own exit status
        self.proc.wait()

    def close(self) -> None:
        self._end()
        with contextlib.suppress(OSError):
            self.stderr.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            if self.proc.poll() is None:
                self.close()
