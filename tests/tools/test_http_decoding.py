"""http_get's cap applies to decoded bytes and decoding stops there: a decompression bomb of any
layering keeps the agent's process under 200 MB of peak memory (measured in a child process
fetching from a loopback server started here)."""

from __future__ import annotations

import gzip
import http.server
import json
import subprocess
import sys
import threading
import zlib

import pytest

from agent.config import Settings
from agent.tools import ToolError
from agent.tools.http import fetch
from agent.tools.http_decoding import BoundedDecoder, layers
from tests.helpers import REPO

BOMB_MB = 384  # decoded size: anything decoding it whole passes 200 MB
PEAK_LIMIT_KB = 200 * 1024


def _compressed(chunks, wbits: int) -> bytes:
    packer = zlib.compressobj(1, zlib.DEFLATED, wbits)
    return b"".join(packer.compress(c) for c in chunks) + packer.flush()


def _zeros():
    return (bytes(4 << 20) for _ in range(BOMB_MB // 4))


@pytest.fixture(scope="module")
def bombs() -> dict[str, tuple[str, bytes]]:
    gz = _compressed(_zeros(), 31)
    deflated = _compressed(_zeros(), 15)
    return {
        "/gzip-gzip": ("gzip, gzip", gzip.compress(gz)),  # the reproduction
        "/gzip": ("gzip", gz),  # one layer, 1.7 MB raw
        "/deflate-gzip": ("deflate, gzip", gzip.compress(deflated)),  # zlib-wrapped inside gzip
        "/x-gzip-identity-deflate": ("x-gzip, identity, deflate", zlib.compress(gz)),
        "/gzip-x3": ("gzip, gzip, gzip", gzip.compress(gzip.compress(gz))),
        "/br": ("br", b"\x0b\x02\x80hello\x03"),
        "/small": ("gzip, deflate", zlib.compress(gzip.compress(b"small and fine"))),
    }


@pytest.fixture
def server(bombs):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            encoding, body = bombs[self.path]
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Encoding", encoding)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_port}"
    srv.shutdown()
    srv.server_close()


# The peak is VmHWM, the new process image's own high-water mark: ru_maxrss would carry over the
# (large) test process's peak, which a forked child inherits across exec.
_CHILD = """
import json, re, sys
from agent.config import Settings
from agent.tools import ToolError
from agent.tools.http import fetch
try:
    out = fetch(sys.argv[1], Settings(http_allow_networks=["127.0.0.0/8"]))
except ToolError as exc:
    out = "ToolError: " + str(exc)
peak_kb = int(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1))
print(json.dumps({"peak_kb": peak_kb, "out": out[:400], "size": len(out)}))
"""


def _fetch_in_child(url: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, url], capture_output=True, text=True, timeout=120, cwd=REPO, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("path", ["/gzip-gzip", "/gzip", "/deflate-gzip", "/x-gzip-identity-deflate"])
def test_a_decompression_bomb_is_cut_at_the_cap_and_the_agent_stays_under_200_mb(server, path):
    got = _fetch_in_child(server + path)
    assert got["peak_kb"] < PEAK_LIMIT_KB, f"peak {got['peak_kb'] // 1024} MB"
    assert got["out"].startswith("HTTP 200")
    assert got["size"] < 65536 + 1000  # the cap (default http_max_bytes) plus the head and the marker


@pytest.mark.parametrize(
    "path, why",
    [
        ("/gzip-x3", "3 content encodings; http_get decodes at most 2"),
        ("/br", "content encoding 'br' is not supported"),
    ],
)
def test_more_layers_or_another_encoding_is_refused_before_decoding(server, path, why):
    got = _fetch_in_child(server + path)
    assert got["peak_kb"] < PEAK_LIMIT_KB
    assert got["out"].startswith("ToolError") and why in got["out"]


def test_a_small_encoded_body_is_decoded(server):
    out = fetch(server + "/small", Settings(http_allow_networks=["127.0.0.0/8"]))
    assert out.startswith("HTTP 200") and out.endswith("\nsmall and fine")


def test_the_decoder_never_gives_more_than_its_limit_whatever_the_chunking():
    data = gzip.compress(zlib.compress(bytes(5 << 20)))
    for size in (1, 7, 4096, len(data)):
        decoder, total = BoundedDecoder(layers("deflate, gzip"), 100_000), 0
        for start in range(0, len(data), size):
            total += len(decoder.feed(data[start : start + size]))
            if decoder.full:
                break
        assert total == 100_000 and decoder.full


def test_garbage_claiming_to_be_gzip_is_a_clear_tool_error():
    with pytest.raises(ToolError, match="could not be decoded"):
        BoundedDecoder(layers("gzip"), 1000).feed(b"this is not gzip at all")
