"""A small scripted OpenAI-compatible HTTP server for tests and benchmarks.

It serves `POST /v1/chat/completions` and `GET /v1/models` on 127.0.0.1 (an ephemeral port) from
a thread, records every request (path, headers, JSON body), and answers each chat request with
the next scripted `Reply` in its queue. When the queue is empty it answers with `default` (a
Reply, or a function of the request body that returns one), so "500 forever" is one line:

    with OpenAIServer(default=Reply.error(500, "boom")) as server:
        ...  # OPENAI_BASE_URL=server.base_url

Replies can carry a status code, a JSON or raw body, extra headers and a delay (to outlast the
client's timeout). Error replies carry `retry-after-ms` by default so the openai client's
retries take milliseconds, not seconds. Successful chat replies report `usage` computed by
`count_tokens` (bytes / 4 unless told otherwise) unless the reply gives its own.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

# What llama-cpp-python's server answers to response_format {"type": "json_schema"} (HTTP 500).
LLAMA_CPP_REJECTION = {
    "error": {
        "message": "[{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
        "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', "
        "'ctx': {'expected': \"'text' or 'json_object'\"}}]",
        "type": "internal_server_error",
        "param": None,
        "code": None,
    }
}


def bytes_over_four(text: str) -> int:
    return max(1, len(text.encode()) // 4) if text else 0


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict/list: sent as JSON; str/bytes: sent raw
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to wait before answering

    @classmethod
    def chat(
        cls, content: str | dict | None, usage: dict | None = None, delay: float = 0.0, finish_reason: str = "stop"
    ) -> "Reply":
        """A chat.completion whose message content is `content` (a dict is sent as its JSON)."""
        if isinstance(content, dict):
            content = json.dumps(content)
        body = {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": 1700000000,
            "model": "test-model",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish_reason}
            ],
        }
        if usage is not None:
            body["usage"] = usage
        return cls(200, body, delay=delay)

    @classmethod
    def calls(
        cls,
        *calls: tuple[str, Any],
        content: str | None = None,
        finish_reason: str = "tool_calls",
        usage: dict | None = None,
    ) -> "Reply":
        """A chat.completion whose message makes native tool calls, in OpenAI's documented shape:
        `calls` are (name, arguments) pairs; a dict's arguments are sent as a JSON string, as OpenAI
        does, and a string as it is (to send broken JSON)."""
        tool_calls = [
            {
                "id": f"call_{n}",
                "type": "function",
                "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
            }
            for n, (name, args) in enumerate(calls)
        ]
        reply = cls.chat(content, usage=usage, finish_reason=finish_reason)
        reply.body["choices"][0]["message"]["tool_calls"] = tool_calls
        return reply

    @classmethod
    def refusal(cls, text: str) -> "Reply":
        """OpenAI's refusal shape: no content, no calls, the reason in `refusal`."""
        reply = cls.chat(None)
        reply.body["choices"][0]["message"]["refusal"] = text
        return reply

    @classmethod
    def error(
        cls, status: int, message: str = "error", body: Any = None, retry_after_ms: int | None = 1, delay: float = 0.0
    ) -> "Reply":
        """An error in OpenAI's shape ({"error": {"message": ...}}), or `body` as given."""
        if body is None:
            body = {"error": {"message": message, "type": "test_error", "param": None, "code": None}}
        headers = {} if retry_after_ms is None else {"retry-after-ms": str(retry_after_ms)}
        return cls(status, body, headers, delay)


def usage(prompt: int, completion: int, cached: int | None = None) -> dict:
    out = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    if cached is not None:
        out["prompt_tokens_details"] = {"cached_tokens": cached}
    return out


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    body: Any  # parsed JSON, or None when the body is not JSON

    @property
    def messages(self) -> list[dict]:
        return self.body["messages"]

    @property
    def tools(self) -> list[str]:
        """The names of the functions the request offered ([] when it sent no tools)."""
        return [t["function"]["name"] for t in (self.body or {}).get("tools") or []]

    @property
    def response_format(self) -> str:
        """The response_format type asked for ('text' when none was sent)."""
        fmt = (self.body or {}).get("response_format")
        return fmt["type"] if fmt else "text"


class OpenAIServer:
    """The server; use as a context manager, or call start() and stop()."""

    def __init__(
        self,
        replies: list[Reply] | None = None,
        default: Reply | Callable[[Request], Reply] | None = None,
        count_tokens: Callable[[str], int] = bytes_over_four,
        models: tuple[str, ...] = ("test-model",),
    ):
        self.queue: deque[Reply | Callable[[Request], Reply]] = deque(replies or [])
        self.default = default
        self.count_tokens = count_tokens
        self.models = models
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -------------------------------------------------------------------------- lifecycle

    def start(self) -> "OpenAIServer":
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="openai-test-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._closing.set()  # wakes handlers that are sleeping out a delay
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join(timeout=5)

    def __enter__(self) -> "OpenAIServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    # ---------------------------------------------------------------------------- scripting

    def add(self, *replies: Reply | Callable[[Request], Reply]) -> None:
        with self._lock:
            self.queue.extend(replies)

    @property
    def chat_requests(self) -> list[Request]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def _next_reply(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            item = self.queue.popleft() if self.queue else self.default
        if item is None:  # a test asked for more replies than it scripted: fail loudly, no retries
            return Reply(
                400,
                {"error": {"message": "test server: script exhausted", "type": "test_error"}},
                {"x-should-retry": "false"},
            )
        reply = item(request) if callable(item) else item
        if (
            reply.status == 200
            and isinstance(reply.body, dict)
            and reply.body.get("object") == "chat.completion"
            and reply.body.get("choices")
            and "usage" not in reply.body
            and isinstance(request.body, dict)
        ):
            reply = Reply(
                reply.status, dict(reply.body, usage=self._usage_for(request, reply)), reply.headers, reply.delay
            )
        return reply

    def _usage_for(self, request: Request, reply: Reply) -> dict:
        def text(message: dict) -> str:  # content, and native calls as their JSON
            calls = message.get("tool_calls")
            return str(message.get("content") or "") + (json.dumps(calls) if calls else "")

        tools = request.body.get("tools")
        prompt = sum(self.count_tokens(text(m)) for m in request.body.get("messages", []))
        prompt += self.count_tokens(json.dumps(tools)) if tools else 0
        return usage(prompt, self.count_tokens(text(reply.body["choices"][0]["message"])))


def _encoded(body: Any) -> bytes:
    """A reply body as sent: JSON for a dict or list, a string encoded, bytes as they are."""
    if isinstance(body, (dict, list)):
        return json.dumps(body).encode()
    if isinstance(body, str):
        return body.encode()
    return body or b""


class _Handler(BaseHTTPRequestHandler):
    """Serves one OpenAIServer (`fake`, set by _handler_for): GET .../models and POST .../chat/completions."""

    protocol_version = "HTTP/1.1"
    fake: OpenAIServer

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def _record(self, method: str) -> Request:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        return Request(method, self.path, {k.lower(): v for k, v in self.headers.items()}, raw, body)

    def _send(self, reply: Reply) -> None:
        if reply.delay and self.fake._closing.wait(reply.delay):
            return
        data = _encoded(reply.body)
        try:
            self.send_response(reply.status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for key, value in reply.headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:  # the client gave up (timeout) and closed the connection
            self.close_connection = True

    def do_GET(self) -> None:
        request = self._record("GET")
        if not self.path.rstrip("/").endswith("/models"):
            self._send(Reply(404, {"error": {"message": f"no route {self.path}"}}))
            return
        with self.fake._lock:
            self.fake.requests.append(request)
        models = [{"id": m, "object": "model", "created": 1700000000, "owned_by": "test"} for m in self.fake.models]
        self._send(Reply(200, {"object": "list", "data": models}))

    def do_POST(self) -> None:
        request = self._record("POST")
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(Reply(404, {"error": {"message": f"no route {self.path}"}}))
            return
        self._send(self.fake._next_reply(request))


def _handler_for(server: OpenAIServer) -> type[BaseHTTPRequestHandler]:
    return type("Handler", (_Handler,), {"fake": server})
