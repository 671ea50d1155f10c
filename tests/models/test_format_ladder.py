"""The format ladder's memory, forced formats, guidance and extra settings of the openai: provider,
through the real CLI against the scripted server on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from agent.config import Settings, load_settings
from agent.models.openai.format_ladder import EndpointMemory, response_format_for
from agent.tools import build_registry
from tests.helpers import configure
from tests.models.openai_server import LLAMA_CPP_REJECTION, OpenAIServer, Reply
from tests.models.test_openai_compat import (
    DONE,
    FAST,
    STATE,
    _scripted_by_format,
    cycle_log,
    run,  # noqa: F401
)


def _memory(home: Path) -> dict:
    return json.loads((home / "logs" / "endpoint.json").read_text())


def test_a_forced_response_format_is_sent_at_once_and_nothing_is_remembered(home: Path, server: OpenAIServer) -> None:
    configure(home, STATE, **(FAST | {"response_format": "json_object"}))
    server.add(Reply.chat(DONE))
    assert run(home, server)[0].exit_code == 0
    assert server.chat_requests[0].body["response_format"] == {"type": "json_object"}
    assert not (home / "logs" / "endpoint.json").exists()


@pytest.mark.parametrize(
    "content", ["{not json", "[]", '{"endpoint": 1}', ""], ids=["broken", "list", "foreign", "empty"]
)
def test_an_unreadable_endpoint_memory_means_probing_again_and_is_rewritten(
    home: Path, server: OpenAIServer, content: str
) -> None:
    configure(home, STATE, **FAST)
    (home / "logs").mkdir(exist_ok=True)
    (home / "logs" / "endpoint.json").write_text(content)
    server.add(Reply.chat(DONE))
    assert run(home, server)[0].exit_code == 0
    assert server.chat_requests[0].response_format == "json_schema"
    assert _memory(home)["response_format"] == "json_schema"


def test_another_model_name_on_the_same_endpoint_is_probed_again(home: Path, server: OpenAIServer) -> None:
    configure(home, STATE, **FAST)
    (home / "logs").mkdir(exist_ok=True)
    (home / "logs" / "endpoint.json").write_text(
        json.dumps({"endpoint": server.base_url, "model": "another-model", "response_format": "text"})
    )
    server.add(Reply.chat(DONE))
    assert run(home, server)[0].exit_code == 0
    assert server.chat_requests[0].response_format == "json_schema"


def test_a_probe_that_fails_for_another_reason_is_retried_with_the_retries_left(
    home: Path, server: OpenAIServer
) -> None:
    configure(home, STATE, **(FAST | {"max_retries": 2}))
    server.add(Reply.error(503, "busy", retry_after_ms=1), Reply.error(503, "busy", retry_after_ms=1), Reply.chat(DONE))
    result, report = run(home, server)
    assert result.exit_code == 0, result.stderr
    assert len(server.chat_requests) == 3  # 1 + max_retries in all, as without a probe
    assert "probe request failed" in cycle_log(home, report)
    assert _memory(home)["response_format"] == "json_schema"


def test_the_llama_cpp_server_costs_one_refused_request_per_home_not_per_cycle(
    home: Path, server: OpenAIServer
) -> None:
    configure(home, STATE, **FAST)
    server.default = _scripted_by_format({"json_schema": Reply(500, LLAMA_CPP_REJECTION)}, [DONE, DONE, DONE])
    for _ in range(3):
        assert run(home, server)[0].exit_code == 0
    assert [r.response_format for r in server.chat_requests].count("json_schema") == 1


def test_the_remembered_endpoint_never_holds_the_credentials_of_its_url(home: Path, server: OpenAIServer) -> None:
    configure(home, STATE, **FAST)
    server.add(Reply.chat(DONE))
    url = server.base_url.replace("http://", "http://user:s3cret-passw0rd-value@")
    assert run(home, server, env={"OPENAI_BASE_URL": url})[0].exit_code == 0
    text = (home / "logs" / "endpoint.json").read_text()
    assert "s3cret" not in text and _memory(home)["endpoint"] == server.base_url


def test_guided_narrows_the_schema_sent_to_an_openai_model(home: Path, server: OpenAIServer) -> None:
    configure(home, STATE, **(FAST | {"guided": True, "response_format": "json_object_schema"}))
    server.add(Reply.chat(DONE))
    assert run(home, server)[0].exit_code == 0
    offered = [
        o["properties"]["tool"]["const"] for o in server.chat_requests[0].body["response_format"]["schema"]["anyOf"]
    ]
    assert len(offered) < len(build_registry(Settings()).names())


def test_the_json_object_rung_carries_the_bounded_action_schema() -> None:
    schema = build_registry(Settings()).action_schema()
    sent = response_format_for("json_object_schema", schema)
    assert sent["type"] == "json_object" and len(sent["schema"]["anyOf"]) == len(schema["anyOf"])
    assert response_format_for("text", schema) is None


def test_local_guided_in_config_yaml_still_sets_guided(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"local_guided": False}))
    assert load_settings(tmp_path, {}).guided is False


@pytest.mark.parametrize(
    "config, key",
    [
        ({"response_format": "xml"}, "response_format"),
        ({"extra_body": ["a"]}, "extra_body"),
        ({"chat_examples": "yes"}, "chat_examples"),
    ],
)
def test_bad_ladder_settings_exit_2_naming_the_key(home: Path, server: OpenAIServer, config: dict, key: str) -> None:
    configure(home, STATE, **(FAST | config))
    result, _ = run(home, server)
    assert result.exit_code == 2 and key in result.stderr
    assert server.requests == []


def test_a_memory_that_cannot_be_written_is_only_logged(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    (logs / "endpoint.json").mkdir(parents=True)  # a directory where the file should be
    lines: list[str] = []
    EndpointMemory(logs / "endpoint.json", "http://127.0.0.1:1/v1", "m").remember("text", lines.append)
    assert lines and "could not update" in lines[0]
