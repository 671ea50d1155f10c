"""The openai: provider against a scripted OpenAI-compatible server on 127.0.0.1.

The real openai client talks real HTTP to tests/models/openai_server.py (never a mocked client), and
most tests drive the whole CLI: `agent run --home H --model openai:test-model --json`.
Retries are kept fast by the server's `retry-after-ms: 1` header and a low max_retries.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import openai
import pytest

from agent.common.outcomes import UsageError
from agent.common.tags import Tag
from agent.config import Settings
from agent.cycle import prompt
from agent.models import ModelError, ModelTimeout, ModelUnavailable
from agent.models import Request as ModelRequest
from agent.models.openai.compat import RESPONSE_FORMATS, OpenAIModel, openai_response_schema
from agent.tools import build_registry
from tests.helpers import (
    REPO,
    configure,
    cycle_records,
    read_yaml,
    remember_raw,
    remembered,
    run_cli,
    run_openai,
    snapshots,
    stored_bytes,
    transcript,
    tree_digest,
)
from tests.models.openai_server import LLAMA_CPP_REJECTION, OpenAIServer, Reply, Request, usage

KEY = "sk-test-7f3a9c1e5b2d4f6a8c0e1234"
STATE = {
    "goals": ["Keep the demo alive"],
    "current_task": "Say hello",
    "pending_actions": ["Check the date"],
    "completed_tasks": ["Set up the home"],
    "notes": "first note",
    "last_updated": "2024-01-01T00:00:00+00:00",
}
FAST = {"max_retries": 1, "request_timeout": 5, "tool_calling": "text"}  # the text path; native: test_tool_calls.py


def echo(message: str) -> dict:
    return {"tool": "echo", "args": {"message": message}}


DONE = {"tool": "done", "args": {"summary": "said hello"}}


def run(home: Path, server: OpenAIServer, *flags: str, env: dict | None = None, key: str | None = KEY):
    """`agent run --json` against the server: (click Result, the --json report or None)."""
    result = run_openai(
        home, server.base_url, *flags, env=({} if key is None else {"OPENAI_API_KEY": key}) | (env or {})
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    return result, (json.loads(lines[-1]) if lines else None)


def cycle_log(home: Path, report: dict) -> str:
    return (home / "logs" / f"cycle_{report['cycle_id']}.log").read_text()


def assert_saved_as_read_plus_note(home: Path, report: dict, *needles: str) -> str:
    """The failed cycle saved the state as read plus one failure note; returns that note."""
    active = read_yaml(home / "scratchpad" / "active.yaml")
    before = read_yaml(snapshots(home, "before")[-1])
    assert {k: before[k] for k in STATE} == STATE  # the before snapshot is the state as read
    for key in ("goals", "current_task", "pending_actions", "completed_tasks"):
        assert active[key] == STATE[key]
    assert active["notes"].startswith(STATE["notes"] + "\n")
    note = active["notes"][len(STATE["notes"]) + 1 :]
    assert "\n" not in note and note.startswith(Tag.CYCLE_FAILED.value)
    for needle in needles:
        assert needle in note, note
    assert report["stop_reason"] == "error" and report["exit_code"] == 4
    return note


# ------------------------------------------------------------------------------ request shape


def test_request_shape_rules_system_state_user_and_json_schema(home: Path, server: OpenAIServer) -> None:
    configure(home, STATE, **(FAST | {"temperature": 0.25, "max_output_tokens": 77}))
    (home / "rules.md").write_text("# House rules\n\nBe brief.\n\n## Tools\n\n{{tools}}\n")
    server.add(Reply.chat(DONE))

    result, report = run(home, server)

    assert result.exit_code == 0, result.stderr
    (request,) = server.chat_requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    body = request.body
    assert body["model"] == "test-model"
    assert body["temperature"] == 0.25 and body["max_tokens"] == 77
    system, *examples, user = body["messages"]  # the packaged examples as turns between (agent/cycle/examples.py)
    assert system["role"] == "system" and user["role"] == "user"
    assert [m["role"] for m in examples] == ["user", "assistant"] * (len(examples) // 2) and examples
    registry = build_registry(Settings())
    assert system["content"] == prompt.system_prompt((home / "rules.md").read_text(), registry)
    assert system["content"].startswith("# House rules\n\nBe brief.")
    for tool in registry:
        assert tool.prompt_line() in system["content"]
    assert "Say hello" not in system["content"]  # nothing that changes goes in the stable prefix
    assert "current_task: Say hello" in user["content"] and "first note" in user["content"]
    assert "Iteration 1 of 10." in user["content"]

    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    sent = fmt["json_schema"]["schema"]
    assert sent == openai_response_schema(registry.action_schema())
    assert sent["type"] == "object" and sent["required"] == ["tool", "args"]
    assert sent["properties"]["tool"]["enum"] == registry.names()
    assert sent["properties"]["args"]["anyOf"] == [tool.args_schema for tool in registry]


def test_tools_disabled_in_config_are_not_in_the_schema(home: Path, server: OpenAIServer) -> None:
    configure(home, STATE, **(FAST | {"tools_disabled": ["write_file"], "shell_policy": "off"}))
    server.add(Reply.chat(DONE))
    result, _ = run(home, server)
    assert result.exit_code == 0, result.stderr
    schema = server.chat_requests[0].body["response_format"]["json_schema"]["schema"]
    names = schema["properties"]["tool"]["enum"]
    assert names == build_registry(Settings(tools_disabled=["write_file"], shell_policy="off")).names()
    assert "write_file" not in names and "shell" not in names and names[-2:] == ["update_scratchpad", "done"]
    assert "write_file(" not in server.chat_requests[0].messages[0]["content"]


def test_system_prompt_is_byte_identical_across_iterations_and_cycles(home: Path, server: OpenAIServer) -> None:
    configure(home, STATE, **FAST)
    server.add(
        Reply.chat(echo("one")), Reply.chat(echo("two")), Reply.chat(DONE), Reply.chat(echo("three")), Reply.chat(DONE)
    )
    assert run(home, server)[0].exit_code == 0
    assert run(home, server)[0].exit_code == 0
    requests = server.chat_requests
    assert len(requests) == 5
    prefixes = {json.dumps(r.messages[:-1]) for r in requests}
    assert len(prefixes) == 1  # the system message and the example turns: the same bytes every time
    users = [r.messages[-1]["content"] for r in requests]
    assert len(set(users)) == 5  # the state and the iteration live in the last user message
    roles = [m["role"] for m in requests[0].messages]
    assert roles[0] == "system" and roles[-1] == "user" and roles[1:-1] == ["user", "assistant"] * (len(roles) // 2 - 1)


def test_chat_examples_off_sends_system_and_user_only(home: Path, server: OpenAIServer) -> None:
    configure(home, STATE, **(FAST | {"chat_examples": False}))
    server.add(Reply.chat(DONE))
    assert run(home, server)[0].exit_code == 0
    (request,) = server.chat_requests
    assert [m["role"] for m in request.messages] == ["system", "user"]
    assert "## Examples" in request.messages[0]["content"]


def test_extra_body_reaches_the_server(home: Path, server: OpenAIServer) -> None:
    configure(home, STATE, **(FAST | {"extra_body": {"repeat_penalty": 1.0, "top_k": 1}}))
    server.add(Reply.chat(DONE))
    assert run(home, server)[0].exit_code == 0
    body = server.chat_requests[0].body
    assert body["repeat_penalty"] == 1.0 and body["top_k"] == 1


# ---------------------------------------------------------------------------------- fallback


def _scripted_by_format(rejects: dict[str, Reply], replies: list[dict]):
    """A responder: a rejection for the formats in `rejects`, else the next reply of `replies`."""
    queue = list(replies)

    def respond(request: Request) -> Reply:
        if request.response_format in rejects:
            return rejects[request.response_format]
        return Reply.chat(queue.pop(0))

    return respond


def test_llama_cpp_500_on_json_schema_falls_back_to_json_object_once(home: Path, server: OpenAIServer) -> None:
    configure(home, STATE, **FAST)
    server.default = _scripted_by_format(
        {"json_schema": Reply(500, LLAMA_CPP_REJECTION, {"retry-after-ms": "1"})}, [echo("a"), echo("b"), DONE]
    )

    result, report = run(home, server)

    assert result.exit_code == 0, result.stderr
    formats = [r.response_format for r in server.chat_requests]
    # the probe is not retried: one refused request, then json_object with the schema, kept
    assert formats == ["json_schema", "json_object", "json_object", "json_object"]
    sent = server.chat_requests[1].body["response_format"]
    assert sent["type"] == "json_object" and sent["schema"]["anyOf"]
    log = cycle_log(home, report)
    assert log.count("refused response_format") == 1
    assert "json_schema (HTTP 500: " in log and "Input should be" in log and "trying json_object_schema" in log
    memory = remembered(home, "endpoint")
    assert memory["response_format"] == "json_object_schema" and memory["model"] == "test-model"
    assert memory["endpoint"] == server.base_url

    # the next cycle starts from the remembered format: no refused request
    server.default = _scripted_by_format({"json_schema": Reply(500, LLAMA_CPP_REJECTION)}, [DONE])
    assert run(home, server)[0].exit_code == 0
    assert [r.response_format for r in server.chat_requests[4:]] == ["json_object"]


def test_a_remembered_format_is_forgotten_when_the_endpoint_or_model_changes(home: Path, server: OpenAIServer) -> None:
    configure(home, STATE, **FAST)
    remember_raw(
        home,
        "endpoint",
        json.dumps({"endpoint": "http://127.0.0.1:1/v1", "model": "test-model", "response_format": "text"}),
    )
    server.add(Reply.chat(DONE))
    assert run(home, server)[0].exit_code == 0
    assert server.chat_requests[0].response_format == "json_schema"  # probed again: another endpoint was remembered
    assert remembered(home, "endpoint")["response_format"] == "json_schema"


def test_a_remembered_format_that_is_refused_later_is_probed_again(home: Path, server: OpenAIServer) -> None:
    configure(home, STATE, **FAST)
    server.add(Reply.chat(DONE))
    assert run(home, server)[0].exit_code == 0  # remembers json_schema
    server.default = _scripted_by_format({"json_schema": Reply(500, LLAMA_CPP_REJECTION)}, [DONE])
    result, report = run(home, server)
    assert result.exit_code == 0, result.stderr
    # a remembered format is sent with the client's retries (max_retries 1), so its refusal costs two requests, once
    assert [r.response_format for r in server.chat_requests[1:]] == ["json_schema", "json_schema", "json_object"]
    assert "now refuses the remembered response_format json_schema" in cycle_log(home, report)
    assert remembered(home, "endpoint")["response_format"] == "json_object_schema"


@pytest.mark.parametrize(
    "status, body",
    [
        (
            400,
            {
                "error": {
                    "message": "response_format of type json_schema is not supported",
                    "type": "invalid_request_error",
                    "param": "response_format",
                    "code": None,
                }
            },
        ),
        (
            422,
            {
                "detail": [
                    {
                        "loc": ["body", "response_format", "type"],
                        "msg": "value is not a valid enumeration member",
                        "type": "type_error.enum",
                    }
                ]
            },
        ),
    ],
    ids=["400", "422"],
)
def test_old_servers_fall_back_to_plain_text(home: Path, server: OpenAIServer, status: int, body: dict) -> None:
    configure(home, STATE, **FAST)
    rejection = Reply(status, body)
    server.default = _scripted_by_format({"json_schema": rejection, "json_object": rejection}, [echo("a"), DONE])

    result, report = run(home, server)

    assert result.exit_code == 0, result.stderr
    requests = server.chat_requests
    assert [r.response_format for r in requests] == ["json_schema", "json_object", "json_object", "text", "text"]
    assert "response_format" not in requests[-1].body
    log = cycle_log(home, report)
    assert log.count("refused response_format json_schema") == 1
    assert log.count("refused response_format json_object_schema") == 1
    assert log.count("refused response_format json_object ") == 1
    assert f"(HTTP {status}: " in log


@pytest.mark.parametrize(
    "reply",
    [
        Reply.error(400, "This model's maximum context length is 4096 tokens"),
        Reply.error(404, "The model `test-model` does not exist"),
        Reply.error(500, "CUDA out of memory", retry_after_ms=1),
    ],
    ids=["400-context", "404-model", "500-other"],
)
def test_other_errors_do_not_fall_back(home: Path, server: OpenAIServer, reply: Reply) -> None:
    configure(home, STATE, **FAST)
    server.default = reply
    result, report = run(home, server)
    assert result.exit_code == 4
    assert {r.response_format for r in server.chat_requests} == {"json_schema"}
    assert "rejected response_format" not in cycle_log(home, report)
    assert_saved_as_read_plus_note(home, report, f"HTTP {reply.status}", reply.body["error"]["message"])


# ------------------------------------------------------------------------ retries and failures


def test_a_429_is_retried_by_the_client_and_the_cycle_goes_on(home: Path, server: OpenAIServer) -> None:
    configure(home, STATE, **FAST)
    server.add(Reply.error(429, "Rate limit reached", retry_after_ms=1), Reply.chat(DONE))
    result, report = run(home, server)
    assert result.exit_code == 0, result.stderr
    assert report["stop_reason"] == "done" and report["iterations"] == 1
    assert len(server.chat_requests) == 2
    active = read_yaml(home / "scratchpad" / "active.yaml")
    assert active["current_task"] == "Check the date"


def test_500_forever_exits_4_with_the_state_as_read(home: Path, server: OpenAIServer) -> None:
    configure(home, STATE, **(FAST | {"max_retries": 2}))
    server.default = Reply.error(500, "upstream exploded", retry_after_ms=1)

    result, report = run(home, server)

    assert result.exit_code == 4
    assert len(server.chat_requests) == 3  # one try and max_retries retries, by the client
    note = assert_saved_as_read_plus_note(home, report, "HTTP 500", "upstream exploded")
    assert "ModelUnavailable" not in note and "Error code" not in note and note.count("HTTP 500") == 1
    assert "HTTP 500" in report["error"]
    log = cycle_log(home, report)  # an ordinary HTTP error is its line, not a traceback
    assert "cycle failed: " in log and "HTTP 500" in log and "Traceback" not in log
    after = read_yaml(snapshots(home, "after")[-1])
    assert after["notes"] == read_yaml(home / "scratchpad" / "active.yaml")["notes"]


def test_a_request_timing_out_after_its_retries_fails_the_cycle_with_exit_4(home: Path, server: OpenAIServer) -> None:
    configure(home, STATE, **(FAST | {"request_timeout": 0.3, "max_retries": 1}))
    server.default = Reply.chat(DONE, delay=10)
    started = time.monotonic()

    result, report = run(home, server)

    assert result.exit_code == 4
    assert time.monotonic() - started < 8
    assert len(server.chat_requests) == 2  # a timeout is retried by the client
    assert_saved_as_read_plus_note(home, report, "no answer from", "within 0.3s")


@pytest.mark.parametrize(
    "reply",
    [
        Reply(200, "this is not JSON at all"),
        Reply(200, '{"id": "x", "choices": [{"message": {"content": "hi"'),
        Reply(200, {"id": "x", "object": "chat.completion"}),
        Reply(200, {"id": "x", "object": "chat.completion", "choices": []}),
        Reply(200, [1, 2, 3]),
        Reply(200, ""),
    ],
    ids=["text", "truncated", "no-choices", "empty-choices", "list", "empty"],
)
def test_malformed_body_exits_4_and_keeps_the_state(home: Path, server: OpenAIServer, reply: Reply) -> None:
    configure(home, STATE, **(FAST | {"max_retries": 0}))
    server.default = reply
    result, report = run(home, server)
    assert result.exit_code == 4, result.stderr
    assert_saved_as_read_plus_note(home, report, "malformed response")


def test_unreachable_endpoint_exits_4(home: Path, server: OpenAIServer) -> None:
    configure(home, STATE, **(FAST | {"max_retries": 0}))
    url = server.base_url
    server.stop()
    result = run_openai(home, url, env={"OPENAI_API_KEY": KEY})
    report = json.loads(result.stdout.splitlines()[-1])
    assert result.exit_code == 4
    assert_saved_as_read_plus_note(home, report, "refused the connection", url.split("/")[2])
    assert (report["error_kind"], report["error_endpoint"]) == ("refused", url.split("/")[2])


# ----------------------------------------------------------------------------------- usage


def test_usage_is_summed_over_the_cycle(home: Path, server: OpenAIServer) -> None:
    configure(home, STATE, **FAST)
    server.add(
        Reply.chat(echo("a"), usage(100, 10, 0)),
        Reply.chat(echo("b"), usage(120, 12, 96)),
        Reply.chat(DONE, usage(140, 14)),
    )

    result, report = run(home, server)

    assert result.exit_code == 0, result.stderr
    expected = {"prompt_tokens": 360, "completion_tokens": 36, "cached_tokens": 96, "total_tokens": 396, "calls": 3}
    assert report["usage"] == expected
    records = cycle_records(home)
    assert records[-1]["cycle_id"] == report["cycle_id"]
    assert records[-1]["usage"] == expected
    for key in ("started", "duration_s", "iterations", "stop_reason", "task_before", "task_after"):
        assert key in records[-1]
    log = cycle_log(home, report)
    assert "usage 120 prompt + 12 completion tokens (96 cached), 1 call" in log  # per call
    assert "exit 0, 360 prompt + 36 completion tokens (96 cached), 3 calls" in log  # the cycle


def test_a_server_without_usage_counts_calls_only(home: Path, server: OpenAIServer) -> None:
    configure(home, STATE, **FAST)
    body = Reply.chat(DONE).body
    server.add(Reply(200, {k: v for k, v in body.items() if k != "usage"} | {"usage": None}))
    result, report = run(home, server)
    assert result.exit_code == 0, result.stderr
    assert report["usage"] == {
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "cached_tokens": 0,
        "total_tokens": 0,
        "calls": 1,
    }


# ---------------------------------------------------------------------------------- limits


def _stopped(home: Path, report: dict, reason: str) -> None:
    assert report["stop_reason"] == reason and report["exit_code"] == 3
    active = read_yaml(home / "scratchpad" / "active.yaml")
    assert Tag.STOPPED.line(f"{reason}:") in active["notes"]
    assert active["current_task"] == "Say hello"  # no done: the task did not advance
    records = cycle_records(home)
    assert records[-1]["stop_reason"] == reason


def test_iteration_cap_and_the_last_prompt_says_it_is_the_last(home: Path, server: OpenAIServer) -> None:
    configure(home, STATE, **FAST)
    server.add(Reply.chat(echo("a")), Reply.chat(echo("b")))
    result, report = run(home, server, "--max-iterations", "2")
    assert result.exit_code == 3
    _stopped(home, report, "max_iterations")
    first, last = (r.messages[-1]["content"] for r in server.chat_requests)
    assert "Iteration 1 of 2." in first and "LAST iteration" not in first
    assert "Iteration 2 of 2." in last and "LAST iteration" in last


@pytest.mark.parametrize("config, calls", [({}, 3), ({"max_parse_errors": 2}, 2)], ids=["default-3", "config-2"])
def test_unparseable_replies_in_a_row(home: Path, server: OpenAIServer, config: dict, calls: int) -> None:
    configure(home, STATE, **(FAST | config))
    # one bad reply, a good one (resets the count), then bad replies until the limit
    server.add(Reply.chat("no json here"), Reply.chat(echo("ok")))
    server.default = Reply.chat("Sure! I will now think about it.")
    result, report = run(home, server)
    assert result.exit_code == 3
    _stopped(home, report, "parse_errors")
    assert len(server.chat_requests) == 2 + calls
    assert f"{calls} unparseable replies in a row" in read_yaml(home / "scratchpad" / "active.yaml")["notes"]


def test_the_token_budget_ends_the_cycle_once_it_is_used_up(home: Path, server: OpenAIServer) -> None:
    configure(home, STATE, **(FAST | {"token_budget": 250}))
    server.add(
        Reply.chat(echo("a"), usage(100, 10)),
        Reply.chat(echo("b"), usage(100, 10)),
        Reply.chat(echo("c"), usage(100, 10)),
    )
    result, report = run(home, server)
    assert result.exit_code == 3
    _stopped(home, report, "token_budget")
    assert len(server.chat_requests) == 3  # 110, 220, 330 >= 250: no fourth call
    assert report["usage"]["total_tokens"] == 330


def test_the_time_budget_ends_the_cycle_between_calls(home: Path, server: OpenAIServer) -> None:
    configure(home, STATE, **(FAST | {"time_budget": 0.5}))
    server.add(*(Reply.chat(echo(str(i)), delay=0.2) for i in range(10)))
    result, report = run(home, server)
    assert result.exit_code == 3
    _stopped(home, report, "time_budget")
    assert 1 <= len(server.chat_requests) <= 4


def test_time_budget_bounds_a_hanging_request(home: Path, server: OpenAIServer) -> None:
    """A request that hangs is cut at the end of the budget: exit 3 with the work kept, not 4."""
    configure(home, STATE, **(FAST | {"time_budget": 1.0, "request_timeout": 30, "max_retries": 2}))
    server.add(Reply.chat(echo("quick")))
    server.default = Reply.chat(DONE, delay=20)
    started = time.monotonic()
    result, report = run(home, server)
    assert time.monotonic() - started < 5
    assert result.exit_code == 3, result.stderr
    _stopped(home, report, "time_budget")
    assert Tag.TOOL.line("echo") in read_yaml(home / "scratchpad" / "active.yaml")["notes"]
    assert len(server.chat_requests) == 2  # the cut request is not retried
    assert "ran out during a model request" in read_yaml(home / "scratchpad" / "active.yaml")["notes"]


def test_an_error_with_too_little_budget_left_to_retry_stops_with_the_work_kept(
    home: Path, server: OpenAIServer
) -> None:
    configure(home, STATE, **(FAST | {"time_budget": 20, "request_timeout": 30, "max_retries": 2}))
    server.add(Reply.chat(echo("quick")), Reply.error(503, "overloaded", retry_after_ms=1))
    result, report = run(home, server)
    assert result.exit_code == 3, result.stderr
    _stopped(home, report, "time_budget")
    notes = read_yaml(home / "scratchpad" / "active.yaml")["notes"]
    assert Tag.TOOL.line("echo") in notes and "HTTP 503" in notes and "not retried" in notes
    assert len(server.chat_requests) == 2


# ------------------------------------------------------------------------ key and headers


@pytest.mark.parametrize(
    "config, variable", [({}, "OPENAI_API_KEY"), ({"api_key_env": "MY_AGENT_KEY"}, "MY_AGENT_KEY")]
)
def test_missing_key_for_a_remote_endpoint_exits_2_naming_the_variable_and_writes_nothing(
    home: Path, server: OpenAIServer, config: dict, variable: str
) -> None:
    configure(home, STATE, **(FAST | config))
    digest = tree_digest(home)
    remote = {"OPENAI_BASE_URL": "http://192.0.2.1/v1"}  # TEST-NET: never contacted
    result, report = run(home, server, key=None, env=dict(remote, OPENAI_API_KEY=KEY) if config else remote)
    assert result.exit_code == 2
    assert variable in result.stderr
    assert report is None
    assert tree_digest(home) == digest
    assert server.requests == []


def test_a_loopback_endpoint_needs_no_key_and_gets_a_placeholder(home: Path, server: OpenAIServer) -> None:
    configure(home, STATE, **FAST)
    server.add(Reply.chat(DONE))
    result, _ = run(home, server, key=None)
    assert result.exit_code == 0, result.stderr
    assert server.chat_requests[0].headers["authorization"] == "Bearer sk-no-key-required"


def test_the_key_is_read_from_the_variable_api_key_env_names(home: Path, server: OpenAIServer) -> None:
    configure(home, STATE, **(FAST | {"api_key_env": "MY_AGENT_KEY"}))
    server.add(Reply.chat(DONE))
    result, _ = run(home, server, key=None, env={"MY_AGENT_KEY": "sk-other-key-0123456789"})
    assert result.exit_code == 0, result.stderr
    assert server.chat_requests[0].headers["authorization"] == "Bearer sk-other-key-0123456789"


def test_extra_headers_from_config_reach_the_server(home: Path, server: OpenAIServer) -> None:
    configure(home, STATE, **FAST, extra_headers={"X-Tenant": "acme", "HTTP-Referer": "https://example.org/agent"})
    server.add(Reply.chat(DONE))
    assert run(home, server)[0].exit_code == 0
    headers = server.chat_requests[0].headers
    assert headers["x-tenant"] == "acme" and headers["http-referer"] == "https://example.org/agent"


def test_base_url_from_config_is_where_requests_go(home: Path, server: OpenAIServer) -> None:
    configure(home, STATE, **(FAST | {"base_url": server.base_url}))
    server.add(Reply.chat(DONE))
    result = run_cli("run", "--home", str(home), "--model", "openai:test-model", env={"OPENAI_API_KEY": KEY})
    assert result.exit_code == 0, result.stderr
    assert len(server.chat_requests) == 1


def test_the_key_never_reaches_logs_snapshots_or_active(home: Path, server: OpenAIServer) -> None:
    configure(home, STATE, **FAST)

    def echo_the_key(request: Request) -> Reply:
        return Reply.chat(echo(f"my key is {request.headers['authorization']}"))

    server.add(echo_the_key, Reply.chat(DONE))
    assert run(home, server)[0].exit_code == 0
    server.default = Reply.error(500, f"invalid key {KEY}", retry_after_ms=1)
    result, report = run(home, server)
    assert result.exit_code == 4
    assert KEY not in result.stdout and KEY not in result.stderr

    files = [p for p in home.rglob("*") if p.is_file()]
    assert any(p.name == "agent.db" for p in files) and len(snapshots(home, "after")) == 2
    for path in files:
        assert KEY.encode() not in path.read_bytes(), path
    notes = read_yaml(home / "scratchpad" / "active.yaml")["notes"]
    assert "[REDACTED]" in notes
    assert "[REDACTED]" in read_yaml(snapshots(home, "after")[0])["notes"]


def test_a_key_in_config_yaml_is_refused(home: Path, server: OpenAIServer) -> None:
    configure(home, STATE, **(FAST | {"api_key": KEY}))
    digest = tree_digest(home)
    result, _ = run(home, server)
    assert result.exit_code == 2 and "api_key" in result.stderr and KEY not in result.stderr
    assert tree_digest(home) == digest


# ---------------------------------------------------------------------- the model, directly


def test_the_model_reports_usage_and_keeps_a_fallen_back_format_for_later_calls(server: OpenAIServer) -> None:
    """OpenAIModel on its own: usage with cached tokens, and the format kept after a fallback."""
    settings = Settings(base_url=server.base_url, max_retries=0, tool_calling="text")
    model = OpenAIModel("test-model", settings, {"OPENAI_API_KEY": KEY})
    lines: list[str] = []
    model.start(lines.append)
    schema = build_registry(settings).action_schema()
    server.add(
        Reply(400, {"error": {"message": "Unknown response_format type json_schema"}}),
        Reply.chat("{}", usage(50, 5, 32)),
        Reply.chat("{}", usage(7, 1)),
    )
    first = model.complete(ModelRequest("S", "U", schema))
    second = model.complete(ModelRequest("S", "U", schema))
    assert (first.usage.prompt_tokens, first.usage.completion_tokens, first.usage.cached_tokens) == (50, 5, 32)
    assert (second.usage.prompt_tokens, second.usage.cached_tokens) == (7, 0)
    assert [r.response_format for r in server.chat_requests] == ["json_schema", "json_object", "json_object"]
    refusals = [line for line in lines if "refused" in line]
    assert len(refusals) == 1 and RESPONSE_FORMATS[1] in refusals[0]


def test_a_reply_cut_at_max_output_tokens_gets_its_own_parse_error_note(home: Path, server: OpenAIServer) -> None:
    configure(home, STATE, **(FAST | {"max_output_tokens": 20}))
    server.add(
        Reply.chat('{"tool": "echo", "args": {"message": "a very long', finish_reason="length"), Reply.chat(DONE)
    )
    result, report = run(home, server)
    assert result.exit_code == 0, result.stderr
    notes = read_yaml(home / "scratchpad" / "active.yaml")["notes"]
    assert "[PARSE ERROR] the reply was cut at max_output_tokens (20) before its JSON closed" in notes
    assert "finish_reason length" in cycle_log(home, report)


def test_client_retries_show_in_the_cycle_log(home: Path, server: OpenAIServer) -> None:
    configure(home, STATE, **FAST)
    server.add(Reply.chat(DONE))  # the probe
    assert run(home, server)[0].exit_code == 0
    server.add(Reply.error(503, "busy", retry_after_ms=1), Reply.chat(DONE))
    result, report = run(home, server)
    assert result.exit_code == 0, result.stderr
    log = cycle_log(home, report)
    [retry] = [line for line in log.splitlines() if "openai client:" in line]
    assert retry.endswith("s with HTTP 503") and "openai client: retry 1: the attempt before it ended after " in retry


def test_a_retry_after_no_reply_shows_in_the_cycle_log_with_how_long_the_attempt_took(home, server) -> None:
    configure(home, STATE, **(FAST | {"request_timeout": 0.5}))
    server.add(Reply.chat(DONE))  # the probe
    assert run(home, server)[0].exit_code == 0
    server.add(Reply.chat(DONE, delay=5), Reply.chat(DONE))  # the first attempt outlasts request_timeout
    result, report = run(home, server)
    assert result.exit_code == 0, result.stderr
    [retry] = [line for line in cycle_log(home, report).splitlines() if "openai client:" in line]
    assert "retry 1: the attempt before it ended after 0." in retry or "after 1." in retry
    assert retry.endswith("with no reply (refused, timed out or the connection was lost)")


def _started_model(server: OpenAIServer, lines: list[str] | None = None, **settings) -> OpenAIModel:
    settings.setdefault("tool_calling", "text")
    model = OpenAIModel("test-model", Settings(base_url=server.base_url, **settings), {"OPENAI_API_KEY": KEY})
    model.start((lines if lines is not None else []).append)
    return model


def _request(timeout: float | None = None) -> ModelRequest:
    return ModelRequest("S", "U", build_registry(Settings()).action_schema(), timeout=timeout)


@pytest.mark.parametrize(
    "reply, kind",
    [
        (Reply.error(500, "upstream exploded"), ModelUnavailable),
        (Reply.error(429, "slow down"), ModelUnavailable),
        (Reply.error(404, "no such model"), ModelError),
        (Reply(200, "not JSON"), ModelError),
    ],
    ids=["500", "429", "404", "malformed"],
)
def test_failures_the_client_retries_are_model_unavailable_and_others_plain_model_errors(
    server: OpenAIServer, reply: Reply, kind: type
) -> None:
    server.default = reply
    with pytest.raises(ModelError) as raised:
        _started_model(server, max_retries=0).complete(_request())
    assert type(raised.value) is kind


def test_a_request_is_cut_at_the_time_left_and_raises_model_timeout_without_a_retry(server: OpenAIServer) -> None:
    server.default = Reply.chat(DONE, delay=20)
    model = _started_model(server, request_timeout=30, max_retries=2)
    started = time.monotonic()

    with pytest.raises(ModelTimeout, match="ran out during a model request"):
        model.complete(_request(timeout=0.5))

    assert time.monotonic() - started < 5 and len(server.chat_requests) == 1


def test_with_no_time_left_no_request_is_sent(server: OpenAIServer) -> None:
    with pytest.raises(ModelTimeout, match="no time was left"):
        _started_model(server).complete(_request(timeout=0))
    assert server.requests == []


def test_a_reply_cut_at_max_output_tokens_says_so_in_the_completion_and_the_log(server: OpenAIServer) -> None:
    server.add(Reply.chat('{"tool": "ec', finish_reason="length"))
    lines: list[str] = []

    completion = _started_model(server, lines).complete(_request())

    assert completion.finish_reason == "length" and completion.text == '{"tool": "ec'
    assert any("cut at max_output_tokens" in line for line in lines)


def test_openai_without_a_model_name_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="model name"):
        OpenAIModel("", Settings(), {"OPENAI_API_KEY": KEY})


def test_the_test_server_lists_its_models_to_the_real_client(server: OpenAIServer) -> None:
    client = openai.OpenAI(api_key=KEY, base_url=server.base_url, max_retries=0)
    assert [m.id for m in client.models.list()] == ["test-model"]


@pytest.mark.parametrize(
    "config, key",
    [
        ({"extra_headers": ["X-Tenant: acme"]}, "extra_headers"),
        ({"max_retries": "three"}, "max_retries"),
        ({"request_timeout": 0}, "request_timeout"),
        ({"token_budget": -5}, "token_budget"),
        ({"temperature": "hot"}, "temperature"),
        ({"max_output_token": 100}, "max_output_token"),
    ],
    ids=["headers-list", "retries-str", "timeout-0", "budget-negative", "temperature-str", "typo"],
)
def test_bad_provider_settings_exit_2_naming_the_key(home: Path, server: OpenAIServer, config: dict, key: str) -> None:
    configure(home, STATE, **(FAST | config))
    digest = tree_digest(home)
    result, _ = run(home, server)
    assert result.exit_code == 2
    assert f"'{key}'" in result.stderr
    assert tree_digest(home) == digest and server.requests == []


def test_prompt_size_bench_runs_and_finds_a_stable_prefix() -> None:
    bench = REPO / "bench" / "prompt_size.py"
    proc = subprocess.run([sys.executable, str(bench), "--json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(rows) >= 4 and len({r["system_sha"] for r in rows}) == 1
    assert all(r["prompt_tokens"] > r["system_tokens"] > 0 for r in rows)
    assert all(r["cached_tokens"] >= r["system_tokens"] for r in rows[1:])  # the prefix cache hits


# ------------------------------------------------------------------------------ transcript


def test_the_transcript_holds_the_messages_the_server_received_and_its_replies_redacted(
    home: Path, server: OpenAIServer
) -> None:
    configure(home, STATE, **FAST)
    server.add(Reply.chat(echo(f"the key is {KEY}")), Reply.chat(DONE, usage=usage(50, 7)))

    result, report = run(home, server)

    assert result.exit_code == 0, result.stderr
    records = transcript(home, report["cycle_id"])
    assert [r["call"] for r in records] == [1, 2]
    for record, request in zip(records, server.chat_requests):
        assert record["messages"] == request.messages  # exactly what went over the wire
        assert record["purpose"] == "action" and record["finish_reason"] == "stop"
    assert KEY.encode() not in stored_bytes(home) and "[REDACTED]" in records[0]["reply"]
    assert json.loads(records[1]["reply"]) == DONE
    assert records[1]["usage"]["prompt_tokens"] == 50 and records[1]["usage"]["completion_tokens"] == 7
