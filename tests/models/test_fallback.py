"""fallback_models: a cycle goes on with the next model when its model is down or over its budget."""

from __future__ import annotations

import json
import socket

import yaml

from tests.helpers import cycle_records, run_cli, write_active
from tests.models.openai_server import OpenAIServer, Reply

TASK = {
    "goals": [],
    "current_task": "Say hello",
    "pending_actions": ["Say it again"],
    "completed_tasks": [],
    "notes": "",
    "last_updated": None,
}
DONE = Reply.chat({"tool": "done", "args": {"summary": "said hello"}})


def configure(home, primary_url, **settings):
    (home / "config.yaml").write_text(
        yaml.safe_dump({"model": "openai:primary-model", "base_url": primary_url, "max_retries": 1, **settings})
    )


def second(server):
    return {"model": "openai:second-model", "base_url": server.base_url, "api_key_env": "inherit"}


def run(home, *extra):
    return run_cli("run", "--home", str(home), "--json", *extra)


def index(home):
    return cycle_records(home)


def closed_port_url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


def test_a_primary_answering_503_hands_the_cycle_to_the_next_model(home):
    write_active(home, TASK)
    with OpenAIServer(default=Reply.error(503, "overloaded")) as primary, OpenAIServer(default=DONE) as backup:
        configure(home, primary.base_url, fallback_models=[second(backup)], metrics_file="agent.prom")
        result = run(home)
        assert result.exit_code == 0, result.output
        assert len(primary.chat_requests) == 2  # the client's retries first (max_retries 1)
        assert len(backup.chat_requests) == 1
    assert json.loads(result.stdout)["model"] == "openai:second-model"
    (record,) = index(home)
    assert record["model"] == "openai:second-model" and record["stop_reason"] == "done"
    assert "agent_last_cycle_model{home=" in (home / "agent.prom").read_text()
    assert 'model="openai:second-model"} 1' in (home / "agent.prom").read_text()
    status = run_cli("status", "--home", str(home), "--json")
    assert "openai:second-model" in status.stdout
    log = next((home / "logs").glob("cycle_*.log")).read_text()
    assert "continues on openai:second-model (fallback_models)" in log


def test_an_unreachable_primary_falls_back_to_a_name_on_the_same_settings(home):
    write_active(home, TASK)
    with OpenAIServer(default=DONE) as backup:
        configure(home, closed_port_url(), fallback_models=[second(backup)])
        result = run(home)
    assert result.exit_code == 0, result.output
    assert index(home)[-1]["model"] == "openai:second-model"


def test_a_refused_request_is_not_sent_elsewhere(home):
    write_active(home, TASK)
    with (
        OpenAIServer(default=Reply.error(400, "bad request", retry_after_ms=None)) as primary,
        OpenAIServer(default=DONE) as backup,
    ):
        configure(home, primary.base_url, fallback_models=[second(backup)], response_format="text")
        result = run(home)
        assert result.exit_code == 4 and backup.requests == []
    assert index(home)[-1]["model"] == "openai:primary-model"


def test_every_model_down_fails_the_cycle_naming_the_last(home):
    write_active(home, TASK)
    with (
        OpenAIServer(default=Reply.error(503, "down")) as primary,
        OpenAIServer(default=Reply.error(502, "also down")) as backup,
    ):
        configure(home, primary.base_url, fallback_models=[second(backup)])
        result = run(home)
    assert result.exit_code == 4
    record = index(home)[-1]
    assert record["model"] == "openai:second-model" and "502" in record["error"]
    assert (record["error_kind"], record["error_endpoint"]) == ("http_5xx", backup.base_url.split("/")[2])


def test_a_model_name_the_primary_does_not_know_is_not_sent_elsewhere(home):
    """A wrong name is a setting to fix: a fallback would hide it on every tick (docs/reference.md)."""
    write_active(home, TASK)
    with (
        OpenAIServer(default=Reply.error(404, "The model `primary-model` does not exist")) as primary,
        OpenAIServer(default=DONE) as backup,
    ):
        configure(home, primary.base_url, fallback_models=[second(backup)])
        result = run(home)
        assert result.exit_code == 4 and backup.requests == []
    assert index(home)[-1]["error_kind"] == "model_not_found"


def test_a_model_over_its_own_budget_hands_on_and_the_last_one_stops_with_exit_10(home):
    write_active(home, TASK)
    with OpenAIServer(default=DONE) as primary, OpenAIServer(default=DONE) as backup:
        configure(
            home,
            primary.base_url,
            fallback_models=[second(backup)],
            model_budgets={"openai:primary-model": {"daily_tokens": 1}},
        )
        assert run(home).exit_code == 0 and len(primary.chat_requests) == 1  # nothing spent yet
        assert run(home).exit_code == 0 and len(primary.chat_requests) == 1 and len(backup.chat_requests) == 1
        assert [r["model"] for r in index(home)] == ["openai:primary-model", "openai:second-model"]
        write_active(home, TASK)
        configure(
            home,
            primary.base_url,
            fallback_models=[second(backup)],
            model_budgets={"openai:primary-model": {"daily_tokens": 1}, "openai:second-model": {"daily_tokens": 1}},
        )
        result = run(home)
        assert result.exit_code == 10, result.output
        assert len(primary.chat_requests) == 1 and len(backup.chat_requests) == 1  # nothing sent


def test_doctor_checks_every_model(home):
    write_active(home, TASK)
    with OpenAIServer(default=DONE) as primary:
        configure(
            home,
            primary.base_url,
            fallback_models=[{"model": "openai:second-model", "base_url": closed_port_url(), "api_key_env": "inherit"}],
        )
        result = run_cli("doctor", "--home", str(home), "--json")
    assert result.exit_code == 1
    checks = {c["check"]: c for c in json.loads(result.stdout)}
    assert checks["model"]["ok"] and checks["chat"]["ok"]
    assert checks["model (fallback 1)"]["detail"] == "openai:second-model"
    assert not checks["endpoint (fallback 1)"]["ok"]


def test_a_bad_fallback_entry_is_a_usage_error(home):
    write_active(home, TASK)
    for entries, message in (
        ([""], "entry 1 has an empty value"),
        ([{"base_url": "http://127.0.0.1:9/v1"}], "fallback_models"),
        (["nosuch:model"], "fallback_models entry 1: unknown model provider"),
    ):
        configure(home, "http://127.0.0.1:9/v1", fallback_models=entries)
        result = run(home)
        assert result.exit_code == 2 and message in result.output, result.output
    assert not (home / "logs").exists() or index(home) == []
