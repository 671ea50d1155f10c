"""A real `python -m llama_cpp.server` on 127.0.0.1, for the suite and for bench/endpoints.py.

Started in its own process group on a free port, ready once GET /v1/models answers (bounded),
stopped by killing the group; it dies with its parent even on SIGKILL (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from agent.models.local.threads import SPIN_COUNT

SERVER_ALIAS = "smollm2"
READY_TIMEOUT = 120.0  # seconds for the server to load the model and answer /v1/models


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:
    """In the server's process: be killed when the bench dies, even by SIGKILL (Linux)."""
    try:
        import ctypes  # only in the child, just before exec

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: stop() in the bench's finally still runs
        pass


class LlamaServer:
    """`python -m llama_cpp.server` in its own process group; stop() kills the group."""

    def __init__(
        self,
        model_path: Path,
        threads: int,
        context: int,
        log_path: Path,
        alias: str = SERVER_ALIAS,
        chat_format: str | None = None,
    ):
        self.port = free_port()
        self.log_path = log_path
        self.argv = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model_path),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_threads",
            str(threads),
            "--n_threads_batch",
            str(threads),
            "--n_ctx",
            str(context),
            "--model_alias",
            alias,
        ]
        if chat_format:  # e.g. chatml-function-calling: `tools` answered with `tool_calls`
            self.argv += ["--chat_format", chat_format]
        self.proc: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout: float = READY_TIMEOUT) -> float:
        """Start and wait until /v1/models answers; the seconds that took. RuntimeError if it never does."""
        started = time.monotonic()
        log = open(self.log_path, "wb")
        # the same thread behaviour as the embedded path: waiting OpenMP threads spin briefly, then sleep
        env = dict(os.environ)
        if "OMP_WAIT_POLICY" not in env:
            env.setdefault("GOMP_SPINCOUNT", SPIN_COUNT)
        self.proc = subprocess.Popen(
            self.argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent,
            env=env,
        )
        log.close()
        while time.monotonic() - started < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as response:
                    if response.status == 200:
                        return time.monotonic() - started
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.25)
        raise RuntimeError(f"llama_cpp.server did not answer /v1/models within {timeout:g}s: {self.log_tail()}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:  # uvicorn waits for a running generation to end; a few seconds is enough grace
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def log_tail(self, chars: int = 600) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no server log)"

    def statuses(self) -> dict[int, int]:
        """How many chat requests the access log shows per HTTP status."""
        counts: dict[int, int] = {}
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return counts
        for status in re.findall(r'"POST /v1/chat/completions HTTP/1\.1" (\d{3})', text):
            counts[int(status)] = counts.get(int(status), 0) + 1
        return counts

    def __enter__(self) -> "LlamaServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
