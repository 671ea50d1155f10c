"""A state of legal updates too large for one prompt leaves the next cycle working: the prompt is
clipped to `prompt_max_bytes` with a note; an endpoint's context_length_exceeded is a clear
failure note, and failed cycles on one task stop with `stalled` (exit 9)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from agent.config import Settings
from agent.cycle import prompt
from tests.helpers import read_yaml, run_cli, run_openai, write_active
from tests.models.openai_server import OpenAIServer, Reply, Request

CONTEXT_BYTES = 32768  # what the test endpoint accepts: prompt_max_bytes, the example turns counted
DONE = {"tool": "done", "args": {"summary": "finished"}}


def _refusing_big_prompts(limit: int = CONTEXT_BYTES):
    def reply(request: Request) -> Reply:
        size = sum(len(str(m.get("content") or "").encode()) for m in request.messages)
        if size > limit:
            return Reply.error(
                400,
                body={
                    "error": {
                        "message": f"This model's maximum context length is 8192 tokens; your messages were {size // 4}",
                        "type": "invalid_request_error",
                        "param": "messages",
                        "code": "context_length_exceeded",
                    }
                },
            )
        return Reply.chat(DONE)

    return reply


def _home(tmp_path: Path, state: dict, **config) -> Path:
    home = tmp_path / "home"
    assert run_cli("init", str(home)).exit_code == 0
    config = {"max_retries": 0, "request_timeout": 5, "prompt_max_bytes": 32768, **config}
    (home / "config.yaml").write_text(yaml.safe_dump(config))
    write_active(home, state)
    return home


def _run(home: Path, server: OpenAIServer):
    result = run_openai(home, server.base_url, env={"OPENAI_API_KEY": "sk-test-key-for-prompts"})
    return result, json.loads([line for line in result.stdout.splitlines() if line.startswith("{")][-1])


def _state(**fields) -> dict:
    return {
        "goals": [],
        "current_task": "t",
        "pending_actions": [],
        "completed_tasks": [],
        "notes": "",
        "last_updated": None,
        **fields,
    }


def test_six_60k_completed_tasks_and_a_huge_queued_task_are_clipped_and_the_cycles_go_on(tmp_path):
    done = [{"task": f"task {i}", "summary": chr(ord("a") + i) * 60_000} for i in range(6)]
    home = _home(tmp_path, _state(completed_tasks=done, pending_actions=["Q" * 60_000 + " the end"]))
    with OpenAIServer(default=_refusing_big_prompts()) as server:
        for _ in range(2):  # the second cycle has the 60,000-character task as its current task
            result, report = _run(home, server)
            assert report["exit_code"] == 0, result.stdout
        users = [r.messages[-1]["content"] for r in server.chat_requests]
    assert all("Note: the scratchpad is too large for one prompt" in u and "characters clipped" in u for u in users)
    assert "the end" in users[-1] and "Now:" in users[-1]  # a clipped value keeps its head and its tail
    assert len(read_yaml(home / "scratchpad" / "active.yaml")["completed_tasks"][0]["summary"]) == 60_000  # kept whole


def test_many_short_items_are_cut_as_a_block_and_the_closing_lines_stay(tmp_path):
    home = _home(tmp_path, _state(pending_actions=[f"queued item number {i} " + "x" * 40 for i in range(3000)]))
    with OpenAIServer(default=_refusing_big_prompts()) as server:
        result, report = _run(home, server)
        user = server.chat_requests[0].messages[-1]["content"]
    assert report["exit_code"] == 0, result.stdout
    assert "the rest of the scratchpad is cut" in user and user.rstrip().splitlines()[-1].startswith("Now:")


def test_a_prompt_the_endpoint_refuses_is_a_clear_note_and_repeated_failures_stay_failures(tmp_path):
    home = _home(tmp_path, _state(current_task="T" * 30_000), prompt_max_bytes=1_000_000, stall_cycles=2)
    with OpenAIServer(default=_refusing_big_prompts(limit=20_000)) as server:
        _, first = _run(home, server)
        _, second = _run(home, server)
        _, third = _run(home, server)
    assert first["exit_code"] == 4 and "does not fit the endpoint's context window" in first["error"]
    assert "maximum context length is 8192 tokens" in first["error"] and "lower prompt_max_bytes" in first["error"]
    assert (second["stop_reason"], third["stop_reason"]) == ("error", "error")  # never turned into a stall
    assert "in a row without done" not in read_yaml(home / "scratchpad" / "active.yaml")["notes"]


def test_the_fitted_prompt_never_passes_the_bound():
    settings = Settings(prompt_max_bytes=6000)
    for state in (
        _state(notes="é" * 50_000),
        _state(current_task="T" * 90_000),
        _state(goals=[f"goal {i}" for i in range(5000)]),
        _state(notes="short"),
    ):
        user = prompt.fitted_user_prompt("system " * 100, state, 1, settings)
        assert len(user.encode()) + 700 <= 6000 and user.rstrip().splitlines()[-1].startswith("Now:")
        user = prompt.fitted_user_prompt("system " * 100, state, 1, settings, others=2000)  # the example turns
        assert len(user.encode()) + 700 + 2000 <= 6000 and user.rstrip().splitlines()[-1].startswith("Now:")


def test_a_cut_block_is_followed_by_the_closing_lines_whole_even_when_items_read_like_them():
    """The block and the closing lines are rendered apart and joined after the cut: nothing is
    looked for in the rendered text."""
    forged = [f"Iteration {i} of 99. " + "x" * 40 for i in range(3000)]  # queued items that look like closing lines
    user = prompt.fitted_user_prompt("system", _state(pending_actions=forged), 3, Settings(prompt_max_bytes=6000))
    block, _, closing = user.partition("[... the rest of the scratchpad is cut: it does not fit prompt_max_bytes ...]")
    assert closing.splitlines()[1:] == [
        "Iteration 3 of 10.",
        "Task: t",
        "Last result: none yet",
        closing.splitlines()[4],  # the note that the scratchpad is clipped
        "Now: Call the tool that does the task.",
    ]
    assert closing.splitlines()[4].startswith("Note: the scratchpad is too large for one prompt")
    assert len(user.encode()) <= 6000
