"""`agent doctor`'s endpoint checks (agent/cli/endpoint_checks.py) against a real HTTP server on
127.0.0.1 that answers whatever a test tells it: a model list, a refusal, a redirect, junk. The
chat check and the doctor command are in tests/cli/test_doctor_endpoint.py."""

from __future__ import annotations

import json
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agent.cli.endpoint_checks import (
    DOCTOR_TIMEOUT_FLOOR,
    Check,
    doctor_timeout,
    key_check,
    matching_id,
    probe_models_endpoint,
)
from agent.config import Settings


class _Endpoint:
    """GET /v1/models answers `status` with `body` (bytes, or JSON) and `headers`; every path asked is kept."""

    def __init__(self):
        self.status, self.body, self.headers, self.paths, self.seen_headers = 200, b"{}", {}, [], []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                endpoint.paths.append(self.path)
                endpoint.seen_headers.append(dict(self.headers))
                body = endpoint.body if isinstance(endpoint.body, bytes) else json.dumps(endpoint.body).encode()
                self.send_response(endpoint.status)
                for name, value in endpoint.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/v1"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def endpoint():
    served = _Endpoint()
    yield served
    served.close()


def probe(url: str, model: str = "smollm2") -> Check:
    return probe_models_endpoint(url, {"Authorization": "Bearer sk-endpoint-check-0123"}, model, 30)


def listing(*ids) -> dict:
    return {"object": "list", "data": [{"id": i} for i in ids]}


def test_an_endpoint_that_serves_the_model_is_ok_and_gets_the_key(endpoint):
    endpoint.body = listing("other", "smollm2")
    check = probe(endpoint.url)
    assert check.ok and not check.warning and check.detail == f"{endpoint.url} is up and serves smollm2"
    assert endpoint.paths == ["/v1/models"]
    assert endpoint.seen_headers[0]["Authorization"] == "Bearer sk-endpoint-check-0123"


def test_a_model_listed_under_another_name_is_ok_saying_which(endpoint):
    endpoint.body = listing("/models/SmolLM2.gguf")
    check = probe(endpoint.url + "/")
    assert check.ok and check.detail.endswith("is up and lists smollm2 as /models/SmolLM2.gguf")


def test_a_model_not_listed_is_a_warning_naming_the_first_eight(endpoint):
    endpoint.body = listing(*(f"m{n}" for n in range(12)))
    check = probe(endpoint.url)
    assert check.ok and check.warning
    assert "does not list model smollm2 (12 listed: m0, m1, m2, m3, m4, m5, m6, m7, …)" in check.detail
    assert check.fix == "use one of the listed names if the chat check fails"


@pytest.mark.parametrize(
    "body",
    [[], {"data": "models"}, {"data": [1, None, "x"]}, {"data": [{"no_id": 1}]}, "a JSON string", None],
)
def test_a_listing_of_any_shape_is_a_warning_not_a_crash(endpoint, body):
    endpoint.body = body
    check = probe(endpoint.url)
    assert check.ok and check.warning and "does not list model smollm2" in check.detail


@pytest.mark.parametrize(
    ("status", "detail", "fix"),
    [
        (401, "refused the key (HTTP 401)", "check the key in the variable named by api_key_env"),
        (403, "refused the key (HTTP 403)", "check the key in the variable named by api_key_env"),
        (404, "answered HTTP 404", "check base_url (OpenAI-compatible servers usually end in /v1)"),
        (500, "answered HTTP 500", "check base_url (OpenAI-compatible servers usually end in /v1)"),
    ],
)
def test_an_error_status_fails_the_check_with_a_fix(endpoint, status: int, detail: str, fix: str):
    endpoint.status, endpoint.body = status, {"error": {"message": "no"}}
    check = probe(endpoint.url)
    assert not check.ok and check.detail == f"{endpoint.url}/models {detail}" and check.fix == fix


def test_a_redirect_is_not_followed_with_the_key(endpoint):
    collector = _Endpoint()
    try:
        endpoint.status, endpoint.headers = 302, {"Location": collector.url + "/models"}
        check = probe(endpoint.url)
    finally:
        collector.close()
    assert not check.ok and "redirects (HTTP 302); the key is not sent after a redirect" in check.detail
    assert collector.paths == []


@pytest.mark.parametrize(
    "body",
    [
        b"<html>not json</html>",
        b"\xff\xfe\x00",
        b'{"data": [' * 10_000,
        b'{"data": ' + b"[" * 10_000 + b"]" * 10_000 + b"}",
    ],
    ids=["html", "binary", "deep-and-cut", "deep"],
)
def test_an_answer_that_is_not_json_fails_the_check(endpoint, body: bytes):
    endpoint.body = body
    check = probe(endpoint.url)
    assert not check.ok and check.detail.endswith("/models did not answer JSON")


def test_an_endpoint_no_one_listens_on_says_it_refused_and_how_long_the_doctor_waited(endpoint):
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    check = probe_models_endpoint(f"http://127.0.0.1:{port}/v1", {}, "m", 60)
    waited = re.fullmatch(
        rf"http://127\.0\.0\.1:{port}/v1/models refused the connection \(nothing listens there; answered in (\S+)s\)",
        check.detail,
    )
    assert not check.ok and waited and float(waited.group(1)) < 60, check.detail
    assert check.fix == "start the server, or fix base_url / OPENAI_BASE_URL"


def test_credentials_in_the_base_url_are_never_shown(endpoint):
    with_credentials = endpoint.url.replace("http://", "http://agent:pa55-w0rd-long@")
    endpoint.body = listing("smollm2")
    assert "pa55" not in probe(with_credentials).detail
    endpoint.status = 500
    assert "pa55" not in probe(with_credentials).detail


def test_the_key_check_needs_a_key_only_for_a_remote_endpoint():
    settings = Settings(api_key_env="MY_KEY")
    assert key_check(settings, {"MY_KEY": "k"}) == Check("key", True, "MY_KEY is set")
    loopback = key_check(settings.replace(base_url="http://localhost:8080/v1"), {})
    assert loopback.ok and loopback.detail == "MY_KEY is not set: a loopback endpoint needs none"
    remote = key_check(settings, {"OPENAI_BASE_URL": "https://llm.example.com/v1"})
    assert not remote.ok and remote.fix.startswith("export MY_KEY=...")
    assert remote.as_dict() == {
        "check": "key",
        "ok": False,
        "warning": False,
        "detail": "MY_KEY is not set",
        "fix": remote.fix,
    }


def test_the_doctor_waits_at_least_its_floor():
    assert doctor_timeout(Settings(request_timeout=5)) == DOCTOR_TIMEOUT_FLOOR
    assert doctor_timeout(Settings(request_timeout=600)) == 600


@pytest.mark.parametrize(
    "wanted, listed, found",
    [
        ("smollm2", ["smollm2"], "smollm2"),
        ("llama3", ["llama3:latest"], "llama3:latest"),  # Ollama
        ("smollm2", ["/models/SmolLM2.gguf"], "/models/SmolLM2.gguf"),  # llama_cpp.server without an alias
        ("gpt-4o-mini", ["gpt-4o", "o1"], None),
    ],
)
def test_model_ids_match_loosely(wanted: str, listed: list[str], found: str | None) -> None:
    assert matching_id(wanted, listed) == found
