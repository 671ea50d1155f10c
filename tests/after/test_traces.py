"""What decides whether a cycle is traced, and what its trace may never carry, without a collector
(the traces themselves, sent to a real one: tests/system/test_traces.py)."""

from __future__ import annotations

import json

import yaml

from agent.config import load_settings
from agent.secrets import Secrets
from tests.helpers import cycle_records, run_cli, write_active, write_script

DONE = {"tool": "done", "args": {"summary": "ok"}}


def traced(home, **settings):
    (home / "config.yaml").write_text(yaml.safe_dump({"otel": True, **settings}))
    write_active(home, {"goals": [], "current_task": "say hi", "pending_actions": []})
    return home


def run(home, tmp_path, env=None):
    script = write_script(tmp_path, [DONE])
    return run_cli("run", "--home", str(home), "--model", f"scripted:{script}", "--json", "-q", env=env)


def test_without_the_setting_no_cycle_is_traced_whatever_the_environment_says(home, tmp_path):
    write_active(home, {"goals": [], "current_task": "say hi", "pending_actions": []})
    result = run(home, tmp_path, env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    assert result.exit_code == 0 and "trace_id" not in json.loads(result.stdout)
    assert "trace_id" not in cycle_records(home)[0]


def test_a_cycle_that_asks_no_model_has_no_trace(home, tmp_path):
    traced(home)
    write_active(home, {"goals": [], "current_task": None, "pending_actions": []})
    result = run(home, tmp_path, env={"AGENT_IDLE": "skip"})
    assert result.exit_code == 0 and json.loads(result.stdout)["stop_reason"] == "idle"
    assert "trace_id" not in cycle_records(home)[0]


def test_an_unsupported_protocol_is_one_line_in_the_log_and_the_same_exit_code(home, tmp_path):
    traced(home)
    result = run(home, tmp_path, env={"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    assert result.exit_code == 0 and result.stderr == ""
    (record,) = cycle_records(home)
    assert len(record["trace_id"]) == 32
    (log,) = (home / "logs").glob("cycle_*.log")
    (line,) = [line for line in log.read_text().splitlines() if "otel:" in line]
    assert "OTEL_EXPORTER_OTLP_PROTOCOL is 'grpc': only http/protobuf is supported" in line


def test_the_otlp_headers_and_endpoint_credentials_are_secrets_on_or_off(tmp_path):
    env = {
        "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20tok-1234567890abcdef,x-tenant=tenant-secret-42",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://user:pw-0987654321zyx@collector.example/v1/traces",
    }
    secrets = Secrets.from_settings(load_settings(tmp_path, env={}), env=env)
    shown = secrets.redact_text("sent tok-1234567890abcdef and tenant-secret-42 with pw-0987654321zyx")
    assert "tok-1234567890abcdef" not in shown and "tenant-secret-42" not in shown and "pw-0987654321zyx" not in shown
    assert "OTEL_EXPORTER_OTLP_HEADERS" not in secrets.child_env({**env, "PATH": "/bin"})
