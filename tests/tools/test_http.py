"""http_get: public addresses only (after DNS and on every redirect), connecting to the address
it checked, with a timeout and a body cap.

No network beyond 127.0.0.1: http_get succeeds only against a loopback server started here
(with http_allow_networks letting loopback in), and refusals are checked before any connect.
"""

from __future__ import annotations

import http.server
import shutil
import socket
import ssl
import subprocess
import threading

import httpx
import pytest
import yaml

import agent.tools.http as http_tool
from agent.common.outcomes import UsageError
from agent.common.tags import Tag
from agent.config import Settings, load_settings
from agent.tools import ToolError
from agent.tools.http import address_problem, fetch
from tests.tools.helpers import call, ctx_for


class _Handler(http.server.BaseHTTPRequestHandler):
    routes: dict = {}

    def do_GET(self):  # noqa: N802
        self.server.seen.append((self.path, self.headers.get("Host")))
        status, headers, body = self.server.routes.get(self.path, (404, {}, b"not here"))
        if callable(body):
            return body(self)
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _big(handler):
    handler.send_response(200)
    handler.send_header("Content-Type", "text/plain")
    handler.end_headers()
    try:
        for _ in range(1000):  # 16 MB if anyone read it all
            handler.wfile.write(b"b" * 16384)
    except (BrokenPipeError, ConnectionResetError):
        handler.server.big_stopped = True


def _slow(handler):
    handler.server.release.wait(10)  # held until the test is over: the client must time out first


def _stalls_mid_body(handler):
    handler.send_response(200)
    handler.send_header("Content-Length", "100")
    handler.end_headers()
    handler.wfile.write(b"first part")
    handler.wfile.flush()
    handler.server.release.wait(10)  # the rest never comes while the client waits


@pytest.fixture
def server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.daemon_threads = True
    srv.seen, srv.release, srv.big_stopped = [], threading.Event(), False
    base = f"http://127.0.0.1:{srv.server_port}"
    srv.routes = {
        "/hello": (200, {"Content-Type": "text/plain; charset=utf-8"}, "héllo".encode()),
        "/to-hello": (302, {"Location": "/hello"}, b""),
        "/to-metadata": (302, {"Location": "http://169.254.169.254/latest/meta-data/"}, b""),
        "/to-private": (307, {"Location": "http://10.0.0.1/admin"}, b""),
        "/to-localhost-name": (302, {"Location": f"http://localhost:{srv.server_port}/hello"}, b""),
        "/loop": (302, {"Location": "/loop"}, b""),
        "/to-file": (302, {"Location": "file:///etc/passwd"}, b""),
        "/big": (200, {}, _big),
        "/slow": (200, {}, _slow),
        "/stalls-mid-body": (200, {}, _stalls_mid_body),
        "/latin1": (200, {"Content-Type": "text/plain; charset=latin-1"}, "héllo".encode("latin-1")),
        "/unknown-charset": (200, {"Content-Type": "text/plain; charset=x-no-such"}, "héllo".encode()),
    }
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    srv.base = base
    yield srv
    srv.release.set()
    srv.shutdown()
    srv.server_close()


LOOPBACK = {"http_allow_networks": ["127.0.0.0/8"]}


@pytest.fixture
def connects(monkeypatch):
    """Every address a connection is opened to (the real connect still happens)."""
    seen = []
    real = socket.create_connection

    def recording(address, *args, **kwargs):
        seen.append(address[0])
        return real(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", recording)
    return seen


def test_http_get_fetches_from_an_allowed_loopback_server(server, tmp_path):
    kind, note = call(ctx_for(tmp_path, **LOOPBACK), "http_get", url=f"{server.base}/hello")
    assert kind is Tag.TOOL and "HTTP 200 OK (text/plain; charset=utf-8)" in note and note.endswith("héllo")


def test_http_get_refuses_loopback_by_default_without_sending_anything(server, tmp_path, connects):
    kind, note = call(ctx_for(tmp_path), "http_get", url=f"{server.base}/hello")
    assert kind is Tag.TOOL_ERROR and "127.0.0.1 is a loopback address" in note
    assert server.seen == [] and connects == []


def test_http_get_checks_names_after_dns_resolution(server, tmp_path, connects):
    kind, note = call(ctx_for(tmp_path), "http_get", url=f"http://localhost:{server.server_port}/hello")
    assert kind is Tag.TOOL_ERROR and "localhost resolves to" in note and "loopback" in note
    assert server.seen == [] and connects == []


def test_http_get_connects_to_the_address_it_checked(server, tmp_path, connects):
    """A name is resolved once per hop and the connection goes to that address (no rebinding)."""
    answers = iter([["127.0.0.1"], ["10.9.9.9"]])  # a rebinding resolver: the second answer is private
    out = fetch(
        f"http://rebind.test:{server.server_port}/hello", Settings(**LOOPBACK), lambda host, port: next(answers)
    )
    assert out.startswith("HTTP 200") and connects == ["127.0.0.1"]
    assert server.seen == [("/hello", f"rebind.test:{server.server_port}")]  # the Host header keeps the name


@pytest.mark.parametrize("answer", [["10.0.0.7"], ["93.184.215.14", "192.168.1.1"], ["::ffff:169.254.169.254"]])
def test_http_get_refuses_a_name_if_any_of_its_addresses_is_not_public(answer, connects):
    with pytest.raises(ToolError, match="resolves to .* http_get only reaches public addresses"):
        fetch("https://public.example/", Settings(), lambda host, port: answer)
    assert connects == []


@pytest.mark.parametrize(
    "path, why",
    [
        ("/to-metadata", "169.254.169.254 is a cloud metadata address"),
        ("/to-private", "10.0.0.1 is a private address"),
        ("/to-file", "only http and https URLs are allowed, not 'file:'"),
    ],
)
def test_http_get_checks_every_redirect_before_connecting(server, tmp_path, connects, path, why):
    kind, note = call(ctx_for(tmp_path, **LOOPBACK), "http_get", url=f"{server.base}{path}")
    assert kind is Tag.TOOL_ERROR and why in note
    assert server.seen == [(path, f"127.0.0.1:{server.server_port}")]
    assert set(connects) == {"127.0.0.1"}


def test_http_get_follows_allowed_redirects(server):
    out = fetch(f"{server.base}/to-hello", Settings(**LOOPBACK))
    assert out.startswith("HTTP 200") and "/hello" in out.splitlines()[0]
    assert [p for p, _ in server.seen] == ["/to-hello", "/hello"]


def test_http_get_resolves_and_checks_the_name_a_redirect_points_to(server, connects):
    answers = {"localhost": ["10.0.0.5"]}  # as if the name pointed into the private network
    with pytest.raises(ToolError, match="localhost resolves to 10.0.0.5: 10.0.0.5 is a private address"):
        fetch(f"{server.base}/to-localhost-name", Settings(**LOOPBACK), lambda host, port: answers[host])
    assert [p for p, _ in server.seen] == ["/to-localhost-name"] and set(connects) == {"127.0.0.1"}


def test_http_get_stops_after_too_many_redirects(server):
    with pytest.raises(ToolError, match="more than 3 redirects"):
        fetch(f"{server.base}/loop", Settings(http_max_redirects=3, **LOOPBACK))
    assert len(server.seen) == 4


@pytest.mark.parametrize(
    "url, why",
    [
        ("file:///etc/passwd", "only http and https"),
        ("ftp://example.com/", "only http and https"),
        ("gopher://127.0.0.1/", "only http and https"),
        ("http://", "no host"),
        ("http://[::1]:1/", "::1 is a loopback address"),
        ("http://0.0.0.0:1/", "0.0.0.0 is a unspecified address"),
        ("http://169.254.169.254/latest/", "cloud metadata"),
        ("http://[fd00:ec2::254]/", "cloud metadata"),
        ("http://2130706433:1/", "loopback"),  # 127.0.0.1 written as a number, caught after resolution
    ],
)
def test_http_get_refuses_schemes_and_addresses(url, why, connects):
    with pytest.raises(ToolError, match=why):
        fetch(url, Settings())
    assert connects == []


@pytest.mark.parametrize(
    "address, refused",
    [
        ("127.0.0.1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.0.1", "private"),
        ("100.64.0.1", "not a public"),
        ("169.254.1.1", "link-local"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("fe80::1", "link-local"),
        ("fc00::1", "private"),
        ("ff02::1", "multicast"),
        ("::ffff:10.0.0.1", "private"),
        ("64:ff9b::a00:1", "address"),
        ("2002:a00:1::", "private"),
        ("169.254.169.254", "cloud metadata"),
        ("100.100.100.200", "cloud metadata"),
        ("fd00:ec2::254", "cloud metadata"),
        ("168.63.129.16", "cloud metadata"),
        ("93.184.215.14", None),
        ("2606:4700::1111", None),
    ],
)
def test_non_public_addresses_are_refused_naming_their_kind_and_public_ones_pass(address, refused):
    problem = address_problem(address, [])
    assert (problem is None) if refused is None else (refused in problem)


def test_allowed_networks_never_open_metadata_addresses():
    assert address_problem("127.0.0.1", ["127.0.0.0/8"]) is None
    assert "cloud metadata" in address_problem("169.254.169.254", ["169.254.0.0/16"])
    assert "cloud metadata" in address_problem("169.254.169.254", ["0.0.0.0/0"])


def test_http_get_body_is_cut_at_the_cap_with_a_marker(server):
    out = fetch(f"{server.base}/big", Settings(http_max_bytes=1000, **LOOPBACK))
    assert out.endswith("\n[body cut at 1000 bytes; the rest was not read]")
    assert out.split("\n")[1] == "b" * 1000


def test_http_get_gives_up_on_a_silent_server_after_its_timeout(server):
    with pytest.raises(ToolError, match="timed out after 0.3s"):
        fetch(f"{server.base}/slow", Settings(http_timeout=0.3, **LOOPBACK))


def test_http_get_gives_up_on_a_body_that_stops_mid_way_after_its_timeout(server):
    with pytest.raises(ToolError, match=r"timed out after 0.3s while reading http://127.0.0.1:\d+/stalls-mid-body"):
        fetch(f"{server.base}/stalls-mid-body", Settings(http_timeout=0.3, **LOOPBACK))


def test_http_get_decodes_the_declared_charset_and_falls_back_to_utf8_for_an_unknown_one(server):
    assert fetch(f"{server.base}/latin1", Settings(**LOOPBACK)).endswith("\nhéllo")
    assert fetch(f"{server.base}/unknown-charset", Settings(**LOOPBACK)).endswith("\nhéllo")


def test_https_requests_carry_the_name_for_sni_and_certificate_checks(monkeypatch):
    sent = []

    def fake_send(self, request, **kwargs):
        sent.append(request)
        raise httpx.ConnectError("stop here")

    monkeypatch.setattr(httpx.Client, "send", fake_send)
    with pytest.raises(ToolError, match="failed"):
        fetch("https://example.test/x", Settings(), lambda host, port: ["93.184.215.14"])
    (request,) = sent
    assert request.url.host == "93.184.215.14" and request.headers["Host"] == "example.test"
    assert request.extensions["sni_hostname"] == "example.test"


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl to make a test certificate")
def test_https_connects_to_the_checked_address_and_verifies_the_name(tmp_path, monkeypatch):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=example.test",
            "-addext",
            "subjectAltName=DNS:example.test",
        ],
        check=True,
        capture_output=True,
        timeout=30,
    )
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.seen, srv.routes = [], {"/hello": (200, {"Content-Type": "text/plain"}, b"over tls")}
    server_side = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_side.load_cert_chain(cert, key)
    srv.socket = server_side.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    monkeypatch.setattr(http_tool, "TLS_VERIFY", ssl.create_default_context(cafile=str(cert)))
    try:
        pinned = lambda host, port: ["127.0.0.1"]  # noqa: E731  both names "resolve" to the test server
        out = fetch(f"https://example.test:{srv.server_port}/hello", Settings(**LOOPBACK), pinned)
        assert out.startswith("HTTP 200") and out.endswith("over tls")
        with pytest.raises(ToolError, match="certificate verify failed"):
            fetch(f"https://other.test:{srv.server_port}/hello", Settings(**LOOPBACK), pinned)
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.mark.parametrize("value, why", [(["not-a-net"], "is not a network"), ("127.0.0.1", "must be a list")])
def test_bad_http_allow_networks_is_a_config_error(tmp_path, value, why):
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"http_allow_networks": value}))
    with pytest.raises(UsageError, match=why):
        load_settings(tmp_path, env={})
