"""`agent doctor` against an OpenAI-compatible server on 127.0.0.1: --model, a real chat
completion with the format a cycle would use, tolerant model ids, no redirects with the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import remember_raw, remembered, run_cli
from tests.models.openai_server import LLAMA_CPP_REJECTION, OpenAIServer, Reply

KEY = "sk-doctor-test-5e1f0a9b3c7d"
ONE_TOKEN = Reply.chat("{", finish_reason="length")


@pytest.fixture
def server():
    with OpenAIServer(models=("smollm2",)) as srv:
        yield srv


def doctor_json(home: Path, *args: str, env: dict | None = None):
    result = run_cli("doctor", "--home", str(home), "--json", *args, env=env)
    return result, {c["check"]: c for c in json.loads(result.stdout)}


def test_doctor_model_checks_the_named_model_with_a_real_one_token_completion(home: Path, server: OpenAIServer) -> None:
    run_cli("init", str(home))
    (home / "config.yaml").write_text(f"base_url: {server.base_url}\n")  # no model configured
    server.add(ONE_TOKEN)

    result, checks = doctor_json(home, "--model", "openai:smollm2")

    assert result.exit_code == 0, result.output
    assert checks["model"]["detail"] == "openai:smollm2" and "needs none" in checks["key"]["detail"]
    (chat,) = server.chat_requests
    assert chat.body["max_tokens"] == 1 and chat.body["model"] == "smollm2"
    assert chat.body["tool_choice"] == "auto" and "response_format" not in chat.body  # tool_calling: auto
    assert "response_format tool_calls" in checks["chat"]["detail"]
    assert remembered(home, "endpoint") is None  # the doctor writes nothing


def test_doctor_probes_like_a_cycle_and_uses_a_remembered_format(home: Path, server: OpenAIServer) -> None:
    run_cli("init", str(home))
    (home / "config.yaml").write_text(f"model: openai:smollm2\nbase_url: {server.base_url}\ntool_calling: text\n")
    server.add(Reply(500, LLAMA_CPP_REJECTION), ONE_TOKEN)
    result, checks = doctor_json(home)
    assert result.exit_code == 0, result.output
    assert "json_object_schema" in checks["chat"]["detail"] and "1 format(s) refused first" in checks["chat"]["detail"]

    remember_raw(
        home,
        "endpoint",
        json.dumps({"endpoint": server.base_url, "model": "smollm2", "response_format": "json_object"}),
    )
    server.add(ONE_TOKEN)
    result, checks = doctor_json(home)
    assert result.exit_code == 0 and server.chat_requests[-1].body["response_format"] == {"type": "json_object"}


def test_a_chat_completion_the_server_refuses_fails_the_doctor_with_the_reason(
    home: Path, server: OpenAIServer
) -> None:
    run_cli("init", str(home))
    (home / "config.yaml").write_text(f"model: openai:smollm2\nbase_url: {server.base_url}\n")
    server.add(Reply.error(404, "model 'smollm2' not loaded"))
    result, checks = doctor_json(home, env={"OPENAI_API_KEY": KEY})
    assert result.exit_code == 1
    assert not checks["chat"]["ok"] and "not loaded" in checks["chat"]["detail"] and checks["chat"]["fix"]
    assert KEY not in result.output


def test_a_redirecting_endpoint_is_not_followed_with_the_key(home: Path, server: OpenAIServer) -> None:
    with OpenAIServer() as collector:
        run_cli("init", str(home))
        (home / "config.yaml").write_text(f"model: openai:smollm2\nbase_url: {server.base_url}\n")
        server.add(Reply(307, {}, {"location": f"{collector.base_url}/chat/completions"}))
        result, checks = doctor_json(home, env={"OPENAI_API_KEY": KEY})
        assert result.exit_code == 1 and not checks["chat"]["ok"]
        assert collector.requests == []
