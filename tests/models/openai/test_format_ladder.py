"""The format ladder's memory, forced formats, guidance and extra settings of the openai: provider,
through the real CLI against the scripted server on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from agent.config import Settings, load_settings
from agent.models.openai.format_ladder import EndpointMemory, response_format_for
from agent.store.home import Home
from agent.tools import build_registry
from tests.helpers import configure, remember_raw, remembered, stored_bytes
from tests.models.openai.test_compat import (
    DONE,
    FAST,
    STATE,
    _scripted_by_format,
    cycle_log,
    run,  # noqa: F401
)
from tests.models.openai_server import LLAMA_CPP_REJECTION, OpenAIServer, Reply
from tests.store.faults import read_only


def _memory(home: Path) -> dict:
    return remembered(home, "endpoint")


def test_a_forced_response_format_is_sent_at_once_and_nothing_is_remembered(home: Path, server: OpenAIServer) -> None:
    configure(home, STATE, **(FAST | {"response_format": "json_object"}))
    server.add(Reply.chat(DONE))
    assert run(home, server)[0].exit_code == 0
    assert server.chat_requests[0].body["response_format"] == {"type": "json_object"}
    assert remembered(home, "endpoint") is None


@pytest.mark.parametrize(
    "content", ["{not json", "[]", '{"endpoint": 1}', ""], ids=["broken", "list", "foreign", "empty"]
)
def test_an_unreadable_endpoint_memory_means_probing_again_and_is_rewritten(
    home: Path, server: OpenAIServer, content: str
) -> None:
    configure(home, STATE, **FAST)
    remember_raw(home, "endpoint", content)
    server.add(Reply.chat(DONE))
    assert run(home, server)[0].exit_code == 0
    assert server.chat_requests[0].response_format == "json_schema"
    assert _memory(home)["response_format"] == "json_schema"


def test_another_model_name_on_the_same_endpoint_is_probed_again(home: Path, server: OpenAIServer) -> None:
    configure(home, STATE, **FAST)
    remember_raw(
        home, "endpoint", json.dumps({"endpoint": server.base_url, "model": "another-model", "response_format": "text"})
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
    assert b"s3cret" not in stored_bytes(home) and _memory(home)["endpoint"] == server.base_url


def test_guided_narrows_the_schema_sent_to_an_openai_model(home: Path, server: OpenAIServer) -> None:
    configure(home, STATE, **(FAST | {"guided": True, "response_format": "json_object_schema"}))
    server.add(Reply.chat(DONE), Reply.chat(DONE))
    assert run(home, server)[0].exit_code == 0
    offered = [
        o["properties"]["tool"]["const"] for o in server.chat_requests[0].body["response_format"]["schema"]["anyOf"]
    ]
    assert len(offered) < len(build_registry(Settings()).names()) and "done" not in offered
    # the endpoint ignored the narrowed schema: its first done was refused, the second was offered
    notes = yaml.safe_load((home / "scratchpad" / "active.yaml").read_text())["notes"]
    assert "[TOOL ERROR] done: not offered for this step" in notes and "[COMPLETED] said hello" in notes


def _update_args(options: list[dict]) -> dict | None:
    """The arguments update_scratchpad is offered, among schema options (None: not offered)."""
    for option in options:
        if option["properties"]["tool"]["const"] == "update_scratchpad":
            return option["properties"]["args"]["properties"]
    return None


@pytest.mark.parametrize("rung", ["json_object_schema", "native"])
def test_a_guided_model_is_never_offered_the_queue_and_a_reply_that_still_sends_it_is_refused(
    home: Path, server: OpenAIServer, rung: str
) -> None:
    # the endpoint ignores the schema it was sent (as a hostile or careless server may): the queue
    # stays as it was, and the call is refused with a note, neither replaced nor appended to
    settings = {"guided": True} | (
        {"response_format": rung} if rung != "native" else {"tool_calling": "native", "response_format": "auto"}
    )
    configure(home, STATE | {"current_task": "Update the scratchpad"}, **(FAST | settings))
    hostile = {"pending_actions": ["Delete everything"], "goals": ["g"]}
    if rung == "native":
        server.add(Reply.calls(("update_scratchpad", hostile)), Reply.calls(("done", DONE["args"])))
    else:
        server.add(Reply.chat({"tool": "update_scratchpad", "args": hostile}), Reply.chat(DONE))
    result, report = run(home, server)
    assert result.exit_code == 0, result.stderr

    body = server.chat_requests[0].body
    sent = [t["function"] for t in body["tools"]] if rung == "native" else body["response_format"]["schema"]["anyOf"]
    if rung == "native":
        offered = next(f["parameters"]["properties"] for f in sent if f["name"] == "update_scratchpad")
    else:
        offered = _update_args(sent)
    assert offered is not None and "pending_actions" not in offered and "goals" in offered
    active = yaml.safe_load((home / "scratchpad" / "active.yaml").read_text())
    assert active["completed_tasks"][-1]["task"] == "Update the scratchpad"
    assert active["current_task"] == "Check the date" and active["pending_actions"] == []  # done took the next one
    assert active["goals"] == STATE["goals"]  # all or nothing: the whole call was refused
    assert (
        "[TOOL ERROR] update_scratchpad: not as offered for this step: 'args' has an unexpected key "
        in (active["notes"])
    )
    assert "Delete everything" not in json.dumps(active["completed_tasks"]) + str(active["pending_actions"])


def test_without_guided_update_scratchpad_offers_and_replaces_the_queue(home: Path, server: OpenAIServer) -> None:
    configure(home, STATE, **(FAST | {"response_format": "json_object_schema"}))
    server.add(Reply.chat({"tool": "update_scratchpad", "args": {"pending_actions": ["B", "C"]}}), Reply.chat(DONE))
    assert run(home, server)[0].exit_code == 0
    assert "pending_actions" in _update_args(server.chat_requests[0].body["response_format"]["schema"]["anyOf"])
    active = yaml.safe_load((home / "scratchpad" / "active.yaml").read_text())
    assert active["current_task"] == "B" and active["pending_actions"] == ["C"]  # replaced, then done moved on


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
    home = Home.at(tmp_path)
    home.ensure_dirs()
    read_only(home)  # the database refuses writes, as on a read-only disk
    lines: list[str] = []
    EndpointMemory(home, "http://127.0.0.1:1/v1", "m").remember("text", lines.append)
    assert lines and "could not update the endpoint probe" in lines[0] and "Read-only" in lines[0]
