"""Traces (`otel: true`) sent to a real OTLP/HTTP receiver, Arize Phoenix from the package index (in
an environment of its own, its telemetry off: tests/tool_venvs.py), and read back from its REST
API: a cycle with tool calls against a real HTTP model server, and one that fails on a dead
endpoint. The tree, the GenAI attributes, the token counts against the record, no secret and no
message content; with `otel_content`, the content, redacted. A collector that never answers costs
a bounded time and one line, and never the exit code."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from agent.after.traces import EXPORT_TIMEOUT_S, SEMCONV_VERSION
from tests.helpers import cycle_records, run_agent_process, run_cli, wait_for, write_active
from tests.models.openai_server import OpenAIServer, Reply, Request
from tests.store.lived_in import closed_port_url
from tests.tool_venvs import require_module, tool

KEY = "sk-test-4f9a8b7c6d5e4f3a2b1c"  # the model's API key: a secret
HEADER = "otlp-token-9z8y7x6w5v4u3t2s"  # an OTLP header's value: a secret too
TASK = "summarise the quarterly figures for Ruritania"  # message content: never in a span unless opted in


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    """The base URL of a Phoenix serving OTLP/HTTP on loopback, storing spans in a temporary folder."""
    require_module("opentelemetry.sdk", "otel")
    program = tool("phoenix")
    folder = tmp_path_factory.mktemp("phoenix")
    port = free_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(folder),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(free_port()),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = (folder / "phoenix.log").open("w")
    server = subprocess.Popen([str(program), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        if server.poll() is not None:
            pytest.fail(f"phoenix exited {server.returncode}: {(folder / 'phoenix.log').read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=5) as response:
                return response.status == 200
        except OSError:
            return False

    try:
        wait_for(healthy, "phoenix to serve", timeout=180)
        yield base
    finally:
        server.terminate()
        server.wait(timeout=60)
        log.close()


def spans_of(base: str, trace_id: str, count: int) -> list[dict]:
    """The spans of one trace as Phoenix stored them, once it holds `count` (it ingests in the background)."""
    found: list[dict] = []

    def stored() -> bool:
        with urllib.request.urlopen(f"{base}/v1/projects/default/spans?limit=1000", timeout=10) as response:
            spans = json.loads(response.read())["data"]
        found[:] = [span for span in spans if span["context"]["trace_id"] == trace_id]
        return len(found) >= count

    wait_for(stored, f"{count} spans of trace {trace_id} in phoenix", timeout=60)
    return found


def traced_home(tmp_path: Path, **settings) -> Path:
    home = tmp_path / "traced"
    (home / "scratchpad").mkdir(parents=True)
    (home / "config.yaml").write_text(yaml.safe_dump({"otel": True, "max_retries": 0, **settings}))
    write_active(home, {"goals": [], "current_task": TASK, "pending_actions": []})
    return home


def otlp_env(base: str) -> dict[str, str]:
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": base, "OTEL_EXPORTER_OTLP_HEADERS": f"x-tenant-token={HEADER}"}


def answers() -> callable:
    """A model that writes a file by a native tool call, then is done."""
    replies = iter([("write_file", {"path": "figures.md", "content": "all well"}), ("done", {"summary": "wrote it"})])

    def answer(request: Request) -> Reply:
        if not request.tools:  # the probe of formats: a text reply
            return Reply.chat({"tool": "done", "args": {"summary": "x"}})
        return Reply.calls(next(replies))

    return answer


def run_traced(home: Path, base_url: str, base: str) -> tuple[int, dict]:
    result = run_cli(
        "run",
        "--home",
        str(home),
        "--model",
        "openai:test-model",
        "--json",
        env={"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": KEY, **otlp_env(base)},
    )
    return result.exit_code, json.loads(result.stdout)


def by_operation(spans: list[dict], operation: str) -> list[dict]:
    return sorted(
        (s for s in spans if s["attributes"].get("gen_ai.operation.name") == operation), key=lambda s: s["start_time"]
    )


def test_a_cycle_with_tool_calls_is_one_trace_of_genai_spans_matching_its_record(phoenix, tmp_path):
    home = traced_home(tmp_path, tool_calling="native")
    with OpenAIServer(default=answers()) as server:
        code, printed = run_traced(home, server.base_url, phoenix)
    assert code == 0
    (record,) = cycle_records(home)
    assert record["trace_id"] == printed["trace_id"] and len(printed["trace_id"]) == 32
    calls = record["usage"]["calls"]
    spans = spans_of(phoenix, record["trace_id"], 1 + calls + 2)
    (root,) = [s for s in spans if s["parent_id"] is None]
    assert root["attributes"]["cycle.id"] == record["cycle_id"]
    assert root["attributes"]["cycle.stop_reason"] == "done" and root["attributes"]["cycle.exit_code"] == 0
    assert root["attributes"]["cycle.home"] == str(home)
    assert all(s["parent_id"] == root["context"]["span_id"] for s in spans if s is not root)
    chats, tools = by_operation(spans, "chat"), by_operation(spans, "execute_tool")
    assert len(chats) == calls
    for chat in chats:
        assert chat["name"] == "chat test-model"
        assert chat["attributes"]["gen_ai.provider.name"] == "openai"
        assert chat["attributes"]["gen_ai.request.model"] == "test-model"
        assert chat["attributes"]["gen_ai.response.model"] == "test-model"
    assert sum(c["attributes"]["gen_ai.usage.input_tokens"] for c in chats) == record["usage"]["prompt_tokens"]
    assert sum(c["attributes"]["gen_ai.usage.output_tokens"] for c in chats) == record["usage"]["completion_tokens"]
    assert chats[-1]["attributes"]["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert [t["attributes"]["gen_ai.tool.name"] for t in tools] == ["write_file", "done"]
    assert [t["attributes"]["gen_ai.tool.call.id"] for t in tools] == ["call_0", "call_0"]
    assert [t["attributes"]["cycle.tool.outcome"] for t in tools] == ["tool", "done"]


def test_no_span_holds_a_secret_or_message_content(phoenix, tmp_path):
    home = traced_home(tmp_path, tool_calling="native")
    with OpenAIServer(default=answers()) as server:
        _, printed = run_traced(home, server.base_url, phoenix)
    spans = json.dumps(spans_of(phoenix, printed["trace_id"], 4))
    for secret in (KEY, HEADER):
        assert secret not in spans
    for content in (TASK, "all well", "figures.md", "gen_ai.input.messages", "gen_ai.tool.call.arguments"):
        assert content not in spans, content


def test_with_otel_content_the_messages_are_in_the_spans_redacted(phoenix, tmp_path):
    home = traced_home(tmp_path, tool_calling="native", otel_content=True)
    write_active(home, {"goals": [], "current_task": f"{TASK} (key {KEY})", "pending_actions": []})
    with OpenAIServer(default=answers()) as server:
        _, printed = run_traced(home, server.base_url, phoenix)
    spans = spans_of(phoenix, printed["trace_id"], 4)
    (first, *_) = by_operation(spans, "chat")
    assert TASK in first["attributes"]["gen_ai.input.messages"]
    assert "write_file" in first["attributes"]["gen_ai.output.messages"]
    (wrote, _done) = by_operation(spans, "execute_tool")
    assert "figures.md" in wrote["attributes"]["gen_ai.tool.call.arguments"]
    assert KEY not in json.dumps(spans) and "[REDACTED]" in first["attributes"]["gen_ai.input.messages"]


def test_a_cycle_failing_on_a_dead_endpoint_is_a_trace_with_its_error(phoenix, tmp_path):
    home = traced_home(tmp_path)
    code, printed = run_traced(home, closed_port_url(), phoenix)
    assert code == 4 and printed["stop_reason"] == "error"
    spans = spans_of(phoenix, printed["trace_id"], 2)
    (root,) = [s for s in spans if s["parent_id"] is None]
    assert root["status_code"] == "ERROR" and "refused the connection" in root["status_message"]
    assert root["attributes"]["cycle.exit_code"] == 4 and root["attributes"]["error.type"]
    (chat,) = by_operation(spans, "chat")
    assert chat["status_code"] == "ERROR" and chat["attributes"]["error.type"]
    assert "gen_ai.usage.input_tokens" not in chat["attributes"]


def test_the_conventions_version_is_pinned_in_the_docs():
    reference = (Path(__file__).parents[2] / "docs" / "reference.md").read_text()
    assert f"semantic conventions {SEMCONV_VERSION}" in reference


def test_a_collector_that_never_answers_costs_a_bounded_time_one_line_and_not_the_exit_code(tmp_path):
    require_module("opentelemetry.sdk", "otel")
    home = traced_home(tmp_path)
    script = tmp_path / "done.yaml"
    script.write_text(yaml.safe_dump([json.dumps({"tool": "done", "args": {"summary": "ok"}})]))
    with socket.socket() as silent:  # takes connections (the kernel's backlog) and never reads or answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        began = time.monotonic()
        ran = run_agent_process(
            "run",
            "--home",
            str(home),
            "--model",
            f"scripted:{script}",
            "--json",
            "--quiet",
            env={"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{silent.getsockname()[1]}"},
        )
        took = time.monotonic() - began
    assert ran.returncode == 0 and json.loads(ran.stdout)["stop_reason"] == "done"
    assert ran.stderr == ""  # nothing for cron to mail
    assert EXPORT_TIMEOUT_S <= took < EXPORT_TIMEOUT_S + 15, took
    (log,) = (home / "logs").glob("cycle_*.log")
    lines = [line for line in log.read_text().splitlines() if "otel:" in line]
    assert len(lines) == 1 and "was not sent to http://127.0.0.1:" in lines[0]
    status = run_cli("status", "--home", str(home))
    assert "traces:    otel export failing since cycle" in status.stdout


def test_a_gates_decision_is_an_event_on_its_span(phoenix, tmp_path):
    home = traced_home(tmp_path, tool_calling="native", approval_required=["write_file"])
    with OpenAIServer(default=answers()) as server:
        code, printed = run_traced(home, server.base_url, phoenix)
    assert code == 8 and printed["stop_reason"] == "awaiting_approval"
    spans = spans_of(phoenix, printed["trace_id"], 3)
    (root,) = [s for s in spans if s["parent_id"] is None]
    (held,) = [e for e in root["events"] if e["name"] == "cycle.gate"]
    assert held["attributes"]["cycle.gate.decision"] == "awaiting_approval"
    (parked,) = by_operation(spans, "execute_tool")
    assert parked["attributes"]["cycle.tool.outcome"] == "parked"
    assert [e["attributes"]["cycle.gate.decision"] for e in parked["events"]] == ["parked"]
