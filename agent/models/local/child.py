"""The embedded model's child process (started by worker.Worker): a LocalRuntime serving
the parent's calls over two pipes until the parent closes them. See worker.py for the
protocol and why the model runs here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import signal
import sys
import traceback
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from agent.config import Settings
from agent.models.base import Log, ModelError, Notice, Request
from agent.models.local.runtime import LocalRuntime
from agent.models.local.threads import set_wait_policy


def _answer(runtime_box: list, op: str, args: list, log: Log) -> Any:
    if op == "start":
        path, settings = args[0], Settings(**args[1])
        if not runtime_box:
            runtime_box.append(LocalRuntime(Path(path), settings))
        runtime_box[0].settings = settings
        runtime_box[0].start(log)
        return None
    runtime = runtime_box[0]
    if op == "complete":
        completion = runtime.complete(Request.from_fields(args[0]))
        return {
            "text": completion.text,
            "usage": dataclasses.asdict(completion.usage),
            "finish_reason": completion.finish_reason,
            "sent": completion.sent,
            "limit": completion.limit,
            "schema": completion.schema,
        }
    if op == "probe":
        tokens, seconds = runtime.probe(args[0])
        return {"tokens": tokens, "seconds": seconds}
    raise ModelError(f"the embedded model's process has no operation {op!r}")


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the cycle's: it ends this child by closing the pipe
    receive, send = Connection(int(argv[0]), writable=False), Connection(int(argv[1]), readable=False)

    def log(line: str) -> None:
        send.send_bytes(json.dumps({"notice" if isinstance(line, Notice) else "log": line}).encode())

    set_wait_policy()  # before llama_cpp loads libgomp: see threads.py
    with contextlib.suppress(ImportError):  # imported now, while the cycle starts; LocalRuntime reports a failure
        import llama_cpp  # noqa: F401
    runtime_box: list = []
    while True:
        try:
            call = json.loads(receive.recv_bytes())
        except EOFError:  # the parent closed the pipe or ended
            return 0
        try:
            message = {"reply": _answer(runtime_box, call["op"], call["args"], log)}
        except ModelError as exc:
            message = {"error": type(exc).__name__, "message": str(exc)}
        except Exception as exc:  # a bug here is a failed model call in the parent, with its traceback logged
            log(traceback.format_exc())
            message = {"error": "ModelError", "message": f"embedded model: {type(exc).__name__}: {exc}"}
        send.send_bytes(json.dumps(message).encode())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
