"""Headless Chromium for the tests, driven over the Chrome DevTools Protocol on a pipe.

`--remote-debugging-pipe` speaks the protocol on file descriptors 3 (to the browser) and 4 (from it),
each message JSON ended by a NUL byte: no port, no websocket library. The browser runs with the
network off: in a network namespace of its own where the test may make one (root; `unshare --net`),
behind a proxy at a closed port always, and every request it makes is recorded, so a test can check
that nothing but file:// was asked for. What the page logs as an error, every exception, and every
dialog (an `alert()` a script injected into the page would open) are recorded too.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "chromium"
TIMEOUT_S = 120.0  # for one answer, on a 2-core machine with both cores busy
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-extensions",
    "--proxy-server=127.0.0.1:9",  # a closed port: a request that got past everything else fails
    "--remote-debugging-pipe",
]


def chromium_or_skip() -> str:
    """The chromium program; a skip where it is missing, a failure under CI (which installs it)."""
    found = shutil.which(CHROMIUM)
    if found is None:
        why = "chromium is not installed (apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(f"CI must run this test, but {why}", pytrace=False)
        pytest.skip(why)
    return found


def _without_network() -> list[str]:
    """The command prefix that gives the browser a network namespace of its own (only loopback, down),
    where this process may make one."""
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        return []
    probe = subprocess.run([unshare, "--net", "true"], capture_output=True)
    return [unshare, "--net"] if probe.returncode == 0 else []


class Chromium:
    """One headless browser with one page; a context manager that ends the browser."""

    def __init__(self, profile: Path, width: int = 1280, height: int = 900):
        program = chromium_or_skip()
        self.isolated = _without_network()
        to_browser_read, self._to_browser = os.pipe()
        self._from_browser, from_browser_write = os.pipe()

        def wire() -> None:  # in the child: the protocol's two descriptors (moved up first: either may be 3 or 4)
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_browser_read, from_browser_write)]
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        command = [*self.isolated, program, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"]
        self.process = subprocess.Popen(
            [*command, "about:blank"],
            pass_fds=(3, 4),
            preexec_fn=wire,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser_read)
        os.close(from_browser_write)
        self._buffer = b""
        self._next_id = 0
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.dialogs: list[str] = []
        self.events: list[dict] = []
        target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self._call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Network", "Log"):
            self.call(f"{domain}.enable")
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )

    # ------------------------------------------------------------------------------ the protocol

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._from_browser], [], [], max(left, 0))
            if not ready:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise EOFError("chromium closed its end of the pipe")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)

    def _note(self, message: dict) -> None:
        method, params = message.get("method"), message.get("params") or {}
        self.events.append(message)
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.errors.append(
                "console: " + " ".join(str(a.get("value", a.get("description"))) for a in params["args"])
            )
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails") or {}
            self.errors.append("exception: " + str((details.get("exception") or {}).get("description") or details))
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            self.errors.append(f"log: {params['entry'].get('text')} {params['entry'].get('url', '')}")
        elif method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])
        elif method == "Page.javascriptDialogOpening":
            self.dialogs.append(params.get("message", ""))
            self._send("Page.handleJavaScriptDialog", {"accept": False}, self.session)

    def _send(self, method: str, params: dict | None, session: str | None) -> int:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        return self._next_id

    def _call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        wanted = self._send(method, params, session)
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            message = self._read(deadline)
            if message.get("id") == wanted:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result") or {}
            self._note(message)

    def call(self, method: str, params: dict | None = None) -> dict:
        """A command to the page; the events that arrive meanwhile are recorded."""
        return self._call(method, params, self.session)

    def wait_for(self, method: str) -> dict:
        """The next event `method` (those already recorded since the last wait count)."""
        deadline = time.monotonic() + TIMEOUT_S
        for n, message in enumerate(self.events):
            if message.get("method") == method:
                del self.events[: n + 1]
                return message
        while True:
            message = self._read(deadline)
            self._note(message)
            if message.get("method") == method:
                self.events.clear()
                return message

    # ------------------------------------------------------------------------------ for a test

    def open(self, url: str) -> None:
        """Load `url` and wait for its load event (its scripts have run)."""
        self.events.clear()
        self.call("Page.navigate", {"url": url})
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (returned by value: JSON-able)."""
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, height: int | None = None) -> bytes:
        """The whole page as a PNG (with `height`, only its top that many pixels)."""
        params: dict[str, Any] = {"format": "png", "captureBeyondViewport": True}
        if height is not None:
            page = self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            params["clip"] = {"x": 0, "y": 0, "width": page[0], "height": min(height, page[1]), "scale": 1}
        return base64.b64decode(self.call("Page.captureScreenshot", params)["data"])

    def mouse(self, kind: str, x: float, y: float) -> None:
        params = {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1 if kind != "mouseMoved" else 0}
        self.call("Input.dispatchMouseEvent", params)

    def tap(self, x: float, y: float) -> None:
        """A finger's tap at (x, y), as a touch screen sends it (the page sees touch events, then a click)."""
        self.call("Emulation.setTouchEmulationEnabled", {"enabled": True, "maxTouchPoints": 1})
        self.call("Input.dispatchTouchEvent", {"type": "touchStart", "touchPoints": [{"x": x, "y": y}]})
        self.call("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})

    def close(self) -> None:
        try:
            self._send("Browser.close", None, None)
            self.process.wait(timeout=TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()
        finally:
            os.close(self._to_browser)
            os.close(self._from_browser)

    def __enter__(self) -> "Chromium":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
