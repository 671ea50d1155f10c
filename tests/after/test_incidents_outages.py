"""Outages at a real endpoint (an HTTP stub on 127.0.0.1): one outage is one incident however the
server words each error, each kind of failure is its own incident, a flapping endpoint is told once
and its end once (to a hook that asked), and records older than `error_kind` still join the outage."""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import threading
from pathlib import Path
from typing import Iterator

import pytest

from agent.store.cycles import add_record
from agent.store.home import Home
from tests.helpers import configure, cycle_records, run_cli
from tests.models.openai_server import OpenAIServer, Reply

TASK = {"current_task": "summarise the logs"}
QUICK = {"max_retries": 0, "request_timeout": 5, "tool_calling": "text", "max_iterations": 1, "stall_cycles": 50}
WORDS = itertools.cycle(["ocelot", "quartz", "meridian", "lantern", "basalt", "tundra", "saffron", "harbor"])


def tick(home: Path, base_url: str) -> tuple[int, list[str]]:
    """One cron tick, `agent run --quiet` on the stub: (its exit code, the lines cron would mail)."""
    result = run_cli(
        "run", "--home", str(home), "--model", "openai:test-model", "--quiet", env={"OPENAI_BASE_URL": base_url}
    )
    assert result.stdout == ""
    return result.exit_code, result.stderr.splitlines()


def reworded(status: int):
    """An error that the server words differently every time (numbers, ids and random words)."""
    counter = itertools.count(1)

    def reply(_request) -> Reply:
        n = next(counter)
        return Reply.error(status, f"invalid request {next(WORDS)} {next(WORDS)} id=req_{n * 7919:08x} at {n}.{n}s")

    return reply


def hook(home: Path, tmp_path: Path) -> Path:
    """An on_cycle_end script that appends what it was told (event, stop reason, stdin) to a file."""
    told = tmp_path / "told.jsonl"
    script = tmp_path / "hook.sh"
    script.write_text(
        f'#!/bin/sh\nprintf \'%s %s \' "$AGENT_EVENT" "$AGENT_STOP_REASON" >> "{told}"\ncat >> "{told}"\n'
    )
    script.chmod(0o755)
    return script


def told(tmp_path: Path) -> list[tuple[str, str, dict]]:
    path = tmp_path / "told.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [(event, reason, json.loads(rest)) for event, reason, rest in (line.split(" ", 2) for line in lines)]


def test_an_outage_whose_every_error_is_worded_differently_mails_once(home):
    configure(home, TASK, **QUICK)
    with OpenAIServer(default=reworded(400)) as server:
        ticks = [tick(home, server.base_url) for _ in range(6)]
    assert [code for code, _ in ticks] == [4] * 6
    assert [len(lines) for _, lines in ticks] == [1, 0, 0, 0, 0, 0]
    records = cycle_records(home)
    assert len({r["error"] for r in records}) == 6 and len({r["incident"] for r in records}) == 1
    assert {r["error_kind"] for r in records} == {"http_400"}


def test_a_5xx_outage_is_one_incident_whatever_its_code(home):
    configure(home, TASK, **QUICK)
    with OpenAIServer(replies=[Reply.error(503, "busy"), Reply.error(502, "<html>bad gateway</html>")]) as server:
        server.default = Reply.error(500, "CUDA out of memory")
        ticks = [tick(home, server.base_url) for _ in range(3)]
    assert [len(lines) for _, lines in ticks] == [1, 0, 0]
    assert {r["error_kind"] for r in cycle_records(home)} == {"http_5xx"}


@contextlib.contextmanager
def hanging_up() -> Iterator[str]:
    """An endpoint that takes each connection and closes it without a word: a lost connection."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            connection.recv(65536)
            connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        stop.set()
        socket.create_connection(listener.getsockname()).close()  # wakes its accept to see the stop
        thread.join(timeout=5)
        listener.close()


def test_a_connection_the_endpoint_drops_is_a_lost_connection_not_a_refusal(home):
    configure(home, TASK, **QUICK)
    with hanging_up() as url:
        code, [line] = tick(home, url)
    [record] = cycle_records(home)
    assert code == 4 and (record["error_kind"], record["error_endpoint"]) == ("connection", url.split("/")[2])
    assert "the connection to " in line and "failed or was lost" in line and "refused" not in line


def _refused_url() -> str:
    with OpenAIServer() as server:
        url = server.base_url
    return url  # stopped: nothing listens on its port now


@pytest.mark.parametrize(
    "kind, reply",
    [
        ("refused", None),
        ("timeout", Reply.chat("late", delay=3)),
        ("http_5xx", Reply.error(503, "Service Unavailable")),
        ("http_401", Reply.error(401, "Incorrect API key provided")),
        ("model_not_found", Reply.error(404, "The model `test-model` does not exist")),
    ],
)
def test_each_kind_of_failure_is_recorded_with_its_kind_and_endpoint(home, kind, reply):
    configure(home, TASK, **dict(QUICK, request_timeout=0.5))
    if reply is None:
        url = _refused_url()
        code, lines = tick(home, url)
    else:
        with OpenAIServer(default=reply, models=("llama-3.1-8b", "qwen2.5-7b")) as server:
            url = server.base_url
            code, lines = tick(home, url)
    [record] = cycle_records(home)
    assert code == 4 and len(lines) == 1
    assert (record["error_kind"], record["error_endpoint"]) == (kind, url.split("/")[2])


def test_refused_timeout_5xx_401_and_a_404_for_the_model_are_five_incidents(home):
    configure(home, TASK, **dict(QUICK, request_timeout=0.5))
    mailed = [tick(home, _refused_url())[1]]
    replies = [
        Reply.chat("late", delay=3),
        Reply.error(503, "Service Unavailable"),
        Reply.error(401, "Incorrect API key provided"),
        Reply.error(404, "The model `test-model` does not exist"),
    ]
    with OpenAIServer() as server:
        for reply in replies:
            server.default = reply
            mailed.append(tick(home, server.base_url)[1])
    records = cycle_records(home)
    assert [r["error_kind"] for r in records] == ["refused", "timeout", "http_5xx", "http_401", "model_not_found"]
    assert len({r["incident"] for r in records}) == 5 and [len(lines) for lines in mailed] == [1] * 5


def test_a_model_name_the_endpoint_does_not_know_names_the_ones_it_offers_and_what_to_do(home):
    configure(home, TASK, **QUICK)
    with OpenAIServer(
        default=Reply.error(404, "The model `test-model` does not exist"), models=("llama-3.1-8b", "qwen2.5-7b")
    ) as server:
        code, [line] = tick(home, server.base_url)
    assert code == 4
    assert "has no model named 'test-model'" in line and "it offers llama-3.1-8b, qwen2.5-7b" in line
    assert "set model (or --model openai:NAME) to one it offers" in line
    assert line.count("HTTP 404") == 1 and "Error code" not in line and "ModelError" not in line


def test_a_refused_connection_says_refused(home):
    configure(home, TASK, **QUICK)
    code, [line] = tick(home, _refused_url())
    assert code == 4 and "refused the connection (nothing listens there)" in line
    assert "timeout" not in line and "ModelUnavailable" not in line


def test_a_flapping_endpoint_mails_once_and_tells_an_opted_in_hook_when_it_is_resolved(home, tmp_path):
    configure(
        home,
        TASK,
        **QUICK,
        incident_close_after=2,
        on_cycle_end=[str(hook(home, tmp_path))],
        notify_on=["error", "resolved"],
    )
    up = Reply.chat({"tool": "echo", "args": {"message": "working"}})  # max_iterations: a good cycle (exit 3)
    down = reworded(503)
    with OpenAIServer() as server:
        codes, mailed = [], []
        for reply in [down, up, down, up, down, up, up, up]:  # down, up, down, up ... then up for good
            server.default = reply
            code, lines = tick(home, server.base_url)
            codes.append(code)
            mailed.append(len(lines))
    assert codes == [4, 3, 4, 3, 4, 3, 3, 3]
    assert mailed == [1, 0, 0, 0, 0, 0, 0, 0]  # quiet_resolved is off: the end is not mailed
    events = told(tmp_path)
    assert [(event, reason) for event, reason, _ in events] == [("cycle", "error"), ("resolved", "resolved")]
    incident = events[1][2]["incident"]
    records = cycle_records(home)
    assert events[1][2]["cycle_id"] == records[6]["cycle_id"]  # the second good cycle in a row
    assert incident["key"] == records[0]["incident"] and incident["kind"] == "http_5xx"
    assert (incident["since"], incident["until"], incident["cycles"]) == (
        records[0]["cycle_id"],
        records[4]["cycle_id"],
        3,
    )
    assert incident["since_time"] == records[0]["started"] and incident["until_time"] >= records[4]["started"]
    assert records[6]["resolved"] == incident["key"] and records[7]["resolved"] is None


def test_quiet_resolved_mails_one_line_when_an_incident_ends(home):
    configure(home, TASK, **QUICK, incident_close_after=1, quiet_resolved=True)
    with OpenAIServer(default=Reply.error(503, "busy")) as server:
        tick(home, server.base_url)
        server.default = Reply.chat({"tool": "echo", "args": {"message": "working"}})
        code, lines = tick(home, server.base_url)
        _, after = tick(home, server.base_url)
    assert code == 3 and len(lines) == 1 and after == []
    assert "resolved: failing (http_5xx at 127.0.0.1:" in lines[0] and ", 1 cycle); then 1 cycle without it" in lines[0]


def test_an_outage_that_spans_the_upgrade_mails_once(home):
    """Records written before error_kind (the class name and the client's repeated code in the
    error, no endpoint): their kind is read again from the text, and they join the outage."""
    configure(home, TASK, **QUICK)
    for n in (1, 2):
        add_record(
            Home.at(home),
            {
                "cycle_id": f"20261101_00000{n}_01",
                "started": f"2026-11-01T00:00:0{n}+00:00",
                "model": "openai:test-model",
                "stop_reason": "error",
                "exit_code": 4,
                "task_before": TASK["current_task"],
                "task_after": TASK["current_task"],
                "error": f"ModelUnavailable: model request failed: HTTP 503: Error code: 503 - busy {n}",
                "incident": "0123456789abcdef",
                "new_incident": n == 1,
            },
        )
    with OpenAIServer(default=reworded(503)) as server:
        ticks = [tick(home, server.base_url) for _ in range(3)]
    assert [len(lines) for _, lines in ticks] == [0, 0, 0]
    status = json.loads(run_cli("status", "--home", str(home), "--json").stdout)["incident"]
    assert status["since"] == "20261101_000001_01" and status["cycles"] == 5 and status["kind"] == "http_5xx"


def test_status_says_since_when_and_how_long_with_the_real_error_of_the_newest_cycle(home):
    configure(home, TASK, **QUICK)
    with OpenAIServer(default=reworded(503)) as server:
        for _ in range(2):
            tick(home, server.base_url)
        url = server.base_url
    first, newest = cycle_records(home)
    out = run_cli("status", "--home", str(home)).stdout
    [line] = [line for line in out.splitlines() if line.startswith("incident:")]
    assert " failing since " in line and " UTC (" in line and f"{url.split('/')[2]} answered HTTP 503" in line
    assert newest["error"] in line and "#" not in line and first["cycle_id"] not in line
    data = json.loads(run_cli("status", "--home", str(home), "--json").stdout)["incident"]
    assert (data["since"], data["last"]) == (first["cycle_id"], newest["cycle_id"])  # ids stay in --json
    assert data["since_time"] == first["started"] and data["error"] == newest["error"] and data["length_s"] >= 0


def test_a_model_the_endpoint_lists_but_refuses_says_the_key_may_not_have_access(home):
    configure(home, TASK, **QUICK)
    with OpenAIServer(default=Reply.error(404, "The model `test-model` does not exist")) as server:
        code, [line] = tick(home, server.base_url)  # the stub lists test-model
    assert code == 4 and "it lists 'test-model' but refuses it, so the key may not have access to it" in line
