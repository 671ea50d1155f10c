"""The openai: provider against the real llama-cpp-python server (`python -m llama_cpp.server`)
serving the bundled GGUF on 127.0.0.1: real cycles, no key, the format probed once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from agent.common.tags import Tag
from agent.config import Settings
from agent.models.local.cache import LOCAL_CACHE_ENV
from agent.models.local.model import bundled_model_path
from agent.models.local.threads import thread_count
from tests.helpers import read_yaml, remembered, run_agent_process, transcript, write_active
from tests.models.llama_server import SERVER_ALIAS, LlamaServer

SERVER_MODULES = ("fastapi", "uvicorn", "sse_starlette", "starlette_context", "pydantic_settings")  # [server]


pytestmark = [pytest.mark.slow, pytest.mark.embedded_model(*SERVER_MODULES)]  # skipped without, failed under CI


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with LlamaServer(bundled_model_path(), thread_count(Settings())[0], 4096, log) as server:
        server.start(timeout=300)  # a busy 2-core CI box loads slowly
        yield server


@pytest.fixture(scope="module")
def function_calling_server(tmp_path_factory):
    """The same model behind llama-cpp-python's chatml-function-calling format: `tools` in, `tool_calls` out."""
    log = tmp_path_factory.mktemp("llama-fc-server") / "server.log"
    with LlamaServer(
        bundled_model_path(), thread_count(Settings())[0], 4096, log, chat_format="chatml-function-calling"
    ) as server:
        server.start(timeout=300)
        yield server


def _cycle(home: Path, server: LlamaServer, tmp_path: Path) -> dict:
    proc = run_agent_process(
        "run",
        "--home",
        str(home),
        "--model",
        f"openai:{SERVER_ALIAS}",
        "--json",
        "--max-iterations",
        "4",
        env={"OPENAI_BASE_URL": server.base_url, LOCAL_CACHE_ENV: str(tmp_path / "cache")},
        timeout=600,
    )
    assert proc.returncode in (0, 3), proc.stderr + server.log_tail()
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_real_cycle_through_llama_cpp_server_probes_the_format_once_and_parses_every_reply(
    home: Path, llama_server: LlamaServer, tmp_path: Path
) -> None:
    (home / "config.yaml").write_text(
        yaml.safe_dump(  # the text path's ladder (native: the tests below)
            {
                "guided": True,
                "extra_body": {"repeat_penalty": 1.0},
                "request_timeout": 300,
                "max_retries": 1,
                "tool_calling": "text",
            }
        )
    )
    write_active(
        home,
        {
            "goals": [],
            "current_task": "Echo the words: good morning",
            "pending_actions": [],
            "completed_tasks": [],
            "notes": "",
            "last_updated": None,
        },
    )
    refused_before = sum(n for status, n in llama_server.statuses().items() if status >= 400)

    first = _cycle(home, llama_server, tmp_path)  # no OPENAI_API_KEY: a loopback endpoint needs none

    assert first["model"] == f"openai:{SERVER_ALIAS}" and first["error"] is None and first["usage"]["calls"] >= 1
    # llama_cpp.server refuses json_schema and takes json_object with the schema: remembered in the home
    memory = remembered(home, "endpoint")
    assert memory == {
        **memory,
        "endpoint": llama_server.base_url,
        "model": SERVER_ALIAS,
        "response_format": "json_object_schema",
    }
    notes = read_yaml(home / "scratchpad" / "active.yaml")["notes"]
    assert Tag.PARSE_ERROR.value not in notes and Tag.UNKNOWN_TOOL.value not in notes
    refused_first = sum(n for status, n in llama_server.statuses().items() if status >= 400) - refused_before
    assert refused_first == 1  # the probe, sent without the client's retries

    second = _cycle(home, llama_server, tmp_path)
    assert second["error"] is None
    refused_both = sum(n for status, n in llama_server.statuses().items() if status >= 400) - refused_before
    assert refused_both == 1  # no refused request after the first cycle
    log = (home / "logs" / f"cycle_{second['cycle_id']}.log").read_text()
    assert "response_format json_object_schema, remembered" in log and "finish_reason" in log


def test_doctor_passes_against_llama_cpp_server_without_a_key(home: Path, llama_server: LlamaServer) -> None:
    assert run_agent_process("init", str(home)).returncode == 0
    proc = run_agent_process(
        "doctor",
        "--home",
        str(home),
        "--model",
        f"openai:{SERVER_ALIAS}",
        "--json",
        env={"OPENAI_BASE_URL": llama_server.base_url},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    checks = {c["check"]: c for c in json.loads(proc.stdout)}
    # tool_calling: auto sends tools first; this server (the model's own template) takes them
    assert checks["endpoint"]["ok"] and "response_format tool_calls (tools taken" in checks["chat"]["detail"]


def _native_home(home: Path, tool_calling: str) -> None:
    (home / "config.yaml").write_text(
        yaml.safe_dump(
            {"tool_calling": tool_calling, "workspace": "workspace", "request_timeout": 300, "max_retries": 1}
        )
    )
    write_active(
        home,
        {
            "goals": [],
            "current_task": "Write the word apple into the file a.txt",
            "pending_actions": [],
            "completed_tasks": [],
            "notes": "",
            "last_updated": None,
        },
    )


def _transcript(home: Path, report: dict) -> list[dict]:
    return transcript(home, report["cycle_id"])


def test_a_real_native_cycle_calls_write_file_and_done_through_the_function_calling_server(
    home: Path, function_calling_server: LlamaServer, tmp_path: Path
) -> None:
    # temperature 0 (the default) and llama.cpp's grammar for each call's arguments: the same calls every run
    _native_home(home, "native")
    report = _cycle(home, function_calling_server, tmp_path)
    assert report["exit_code"] == 0 and report["error"] is None, report
    assert (home / "workspace" / "a.txt").read_text() == "apple"
    calls = [call["function"]["name"] for record in _transcript(home, report) for call in record.get("tool_calls", [])]
    assert calls == ["write_file", "done"]
    assert all(record["tools"] for record in _transcript(home, report))


def test_auto_settles_on_native_calls_after_one_probe_and_remembers_it(
    home: Path, function_calling_server: LlamaServer, tmp_path: Path
) -> None:
    _native_home(home, "auto")
    refused_before = sum(n for status, n in function_calling_server.statuses().items() if status >= 400)
    report = _cycle(home, function_calling_server, tmp_path)
    assert report["exit_code"] == 0 and (home / "workspace" / "a.txt").read_text() == "apple"
    memory = remembered(home, "endpoint")
    assert (memory["tool_calling"], memory["response_format"]) == ("native", "tool_calls")
    records = _transcript(home, report)
    assert all(record.get("tool_calls") for record in records)  # native from the first request on
    assert sum(n for status, n in function_calling_server.statuses().items() if status >= 400) == refused_before
    log = (home / "logs" / f"cycle_{report['cycle_id']}.log").read_text()
    assert "endpoint accepts response_format tool_calls; remembered" in log
