#!/usr/bin/env python3
"""Prompt size, measured: bytes and tokens of every prompt over two real cycles.

Runs two `agent` cycles in a fresh home made with the default template and rules, using the
openai: provider against a local OpenAI-compatible server (tests/models/openai_server.py) that plays
a fixed script of replies and reports `usage` the way a real server does:

  * prompt_tokens: the chat prompt tokenized with the embedded model's tokenizer (SmolLM2, via
    llama_cpp with vocab_only; the ChatML template), or bytes/4 when llama_cpp is not installed;
  * cached_tokens: the token prefix shared with the previous request, which is what a provider's
    prefix cache (OpenAI, vLLM, llama.cpp's slot cache) can reuse.

For each iteration it prints the system message (rules + tool list: the stable prefix) and the
user message (the scratchpad and the iteration line) on their own, in bytes and tokens, then the
usage the server returned; and it checks that the system message and the response_format schema
are byte-identical across every iteration and both cycles. Exit status 1 if they are not.

    python bench/prompt_size.py            # table
    python bench/prompt_size.py --json     # one JSON object per request
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agent.cli import main as cli_main  # noqa: E402
from agent.config import load_settings  # noqa: E402
from agent.cycle.run import run_cycle  # noqa: E402
from agent.models import resolve_model  # noqa: E402
from agent.models.local.cache import common_prefix  # noqa: E402
from agent.models.local.model import bundled_model_path  # noqa: E402
from agent.store.home import Home  # noqa: E402
from tests.models.openai_server import OpenAIServer, Reply, Request, usage  # noqa: E402

# Two cycles on the default (empty) template: plan, act, finish; then act and finish again.
CYCLES = [
    [
        {
            "tool": "update_scratchpad",
            "args": {
                "goals": ["Keep a daily log of the machine"],
                "current_task": "Note the current date",
                "pending_actions": ["Write the date into log.txt"],
            },
        },
        {"tool": "echo", "args": {"message": "starting the daily log"}},
        {"tool": "shell", "args": {"command": "date -u"}},
        {"tool": "done", "args": {"summary": "Noted the current date"}},
    ],
    [
        {"tool": "write_file", "args": {"path": "log.txt", "content": "checked the date\n"}},
        {"tool": "done", "args": {"summary": "Wrote the date into log.txt"}},
    ],
]


@contextlib.contextmanager
def _quiet_stderr():
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


class Tokenizer:
    """The embedded model's tokenizer (real counts), else bytes/4 (an estimate)."""

    def __init__(self) -> None:
        self.llm = None
        self.name = "bytes/4 (estimate: llama_cpp or the bundled GGUF is not installed)"
        path = bundled_model_path()
        if path is not None:
            try:
                from llama_cpp import Llama

                with _quiet_stderr():  # llama.cpp prints context warnings from C
                    self.llm = Llama(model_path=str(path), vocab_only=True, verbose=False)
                self.name = f"{path.name} tokenizer (llama_cpp, vocab_only)"
            except Exception as exc:  # noqa: BLE001 - fall back to the estimate, and say why
                self.name += f" [{type(exc).__name__}: {exc}]"

    def tokens(self, text: str) -> list[int]:
        if self.llm is None:
            data = text.encode()
            return [int.from_bytes(data[i : i + 4], "big") for i in range(0, len(data), 4)]
        return self.llm.tokenize(text.encode(), add_bos=False, special=True)


def chatml(messages: list[dict]) -> str:
    """The prompt a ChatML server (SmolLM2, Qwen, ...) builds from the messages."""
    body = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return body + "<|im_start|>assistant\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object per request")
    args = parser.parse_args()

    tokenizer = Tokenizer()
    replies = [r for cycle in CYCLES for r in cycle]
    served: list[dict] = []  # the usage the server returned, one per request, in order
    previous: list[int] = []

    def respond(request: Request) -> Reply:
        nonlocal previous
        tokens = tokenizer.tokens(chatml(request.messages))
        content = json.dumps(replies.pop(0))
        reported = usage(len(tokens), len(tokenizer.tokens(content)), common_prefix(previous, tokens))
        previous = tokens
        served.append(reported)
        return Reply.chat(content, reported)

    with tempfile.TemporaryDirectory() as tmp, OpenAIServer(default=respond) as server:
        root = Path(tmp) / "home"
        with contextlib.redirect_stdout(io.StringIO()):
            cli_main(["init", str(root)], standalone_mode=False)
        env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "bench-key-not-secret"}
        reports = []
        for _ in CYCLES:
            settings = load_settings(root, env=env, model="openai:bench-model", max_retries=0, tool_calling="text")
            reports.append(run_cycle(Home.at(root), settings, resolve_model(settings, root, env), force=True))
        requests = server.chat_requests

    positions = [(c, i) for c, cycle in enumerate(CYCLES, 1) for i in range(1, len(cycle) + 1)]
    rows = []
    for (cycle, iteration), request, reported in zip(positions, requests, served):
        # the stable prefix: the system message and, with chat_examples, the example turns
        *prefix, user = (m["content"] for m in request.messages)
        system = "\n".join(prefix)
        schema = json.dumps(request.body.get("response_format"), sort_keys=True)
        rows.append(
            {
                "cycle": cycle,
                "iteration": iteration,
                "system_bytes": len(system.encode()),
                "system_tokens": len(tokenizer.tokens(system)),
                "user_bytes": len(user.encode()),
                "user_tokens": len(tokenizer.tokens(user)),
                "schema_bytes": len(schema.encode()),
                "prompt_tokens": reported["prompt_tokens"],
                "cached_tokens": reported["prompt_tokens_details"]["cached_tokens"],
                "system_sha": hashlib.sha256(system.encode()).hexdigest()[:12],
                "schema_sha": hashlib.sha256(schema.encode()).hexdigest()[:12],
            }
        )

    same_system = len({r["system_sha"] for r in rows}) == 1
    same_schema = len({r["schema_sha"] for r in rows}) == 1
    if args.json:
        for row in rows:
            print(json.dumps(row))
    else:
        print(f"tokens: {tokenizer.name}")
        print(f"cycles: {', '.join(f'{r.cycle_id} {r.stop_reason} in {r.iterations} iterations' for r in reports)}")
        print(
            "usage per cycle (from the server's `usage`): "
            + "; ".join(
                f"prompt {r.usage.prompt_tokens}, completion {r.usage.completion_tokens}, "
                f"cached {r.usage.cached_tokens}"
                for r in reports
            )
        )
        print()
        header = (
            "cycle",
            "iter",
            "system B",
            "system tok",
            "user B",
            "user tok",
            "schema B",
            "prompt tok",
            "cached tok",
            "system sha256",
        )
        print("  ".join(f"{h:>10}" for h in header))
        for r in rows:
            values = (
                r["cycle"],
                r["iteration"],
                r["system_bytes"],
                r["system_tokens"],
                r["user_bytes"],
                r["user_tokens"],
                r["schema_bytes"],
                r["prompt_tokens"],
                r["cached_tokens"],
                r["system_sha"],
            )
            print("  ".join(f"{v:>10}" for v in values))
        print()
        print(
            f"system message (rules + tools) byte-identical across {len(rows)} requests in {len(reports)} cycles: "
            f"{'yes' if same_system else 'NO'}"
        )
        print(f"response_format schema byte-identical across them: {'yes' if same_schema else 'NO'}")
    return 0 if same_system and same_schema else 1


if __name__ == "__main__":
    sys.exit(main())
