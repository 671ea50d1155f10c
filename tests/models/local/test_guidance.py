"""Guidance for the small local model: the grammar is narrowed per step from the structured step."""

from __future__ import annotations

import json

import pytest

from agent.common.tags import Outcome, Tag
from agent.config import Settings
from agent.models import Request
from agent.models.local.guidance import (
    MAX_SPAN_WORDS,
    arguments_from_task,
    focused_tools,
    guided_schema,
    rank_tools,
    restrict_schema,
    result_values,
    summary_from_result,
    task_paths,
    task_spans,
    without_queue,
)
from agent.models.local.model import bounded_schema, local_runtime_installed
from agent.tools import build_registry


def _ran(tool: str, args: dict, result: str) -> Outcome:
    """The outcome of a tool call that returned `result`, as the dispatcher makes it."""
    return Outcome(Tag.TOOL, Tag.TOOL.line(f"{tool}({json.dumps(args)}) -> {result}"), tool, args, result)


DONE_WITH_UPTIME = _ran("shell", {"command": "uptime"}, "up 3 days")
NO_SUCH_FILE = Outcome(Tag.TOOL_ERROR, "[TOOL ERROR] read_file: no such file", "read_file", {"path": "x"})


def _registry_schema() -> dict:
    return build_registry(Settings()).action_schema()


def _offered(schema: dict) -> list[str]:
    return [option["properties"]["tool"]["const"] for option in schema["anyOf"]]


@pytest.mark.parametrize(
    "task, best",
    [
        ("Run the command uptime and report it", "shell"),
        ("Show what is in the folder reports", "list_dir"),
        ("Fetch https://example.org/ and tell me the status", "http_get"),
        ("Put 'Buy bread' on the pending actions", "update_scratchpad"),
        ("Echo the word hi", "echo"),
    ],
)
def test_tools_are_ranked_by_the_words_their_own_definitions_share_with_the_task(task, best):
    ranked = rank_tools(task, _registry_schema())

    assert ranked[0][0] == best and ranked[0][1] > ranked[1][1]
    assert "done" not in [name for name, _ in ranked]  # always on offer, never ranked


def test_the_first_step_of_a_task_offers_only_the_relevant_tools_and_later_steps_also_done():
    schema = _registry_schema()
    first = focused_tools("Run the command uptime and report it", None, schema)
    later = focused_tools("Run the command uptime and report it", DONE_WITH_UPTIME, schema)

    assert first[0] == "shell" and "done" not in first and len(first) <= 2
    assert later[0] == "shell" and later[-1] == "done"
    assert _offered(restrict_schema(schema, later)) == [n for n in _offered(schema) if n in later]


def test_with_no_task_or_no_matching_tool_every_tool_stays_on_offer():
    schema = _registry_schema()
    assert focused_tools(None, None, schema) is None
    assert focused_tools("Ponder quietly", None, schema) is None
    assert restrict_schema(schema, None) is schema


def test_the_guided_schema_comes_from_the_structured_step_not_from_the_user_text():
    schema = _registry_schema()
    # the user text names another task: only the structured fields count
    request = Request(
        system="S",
        user="Task: Echo the word hi\nLast result: none yet\n",
        schema=schema,
        task="List the folder reports",
        previous=None,
    )

    guided = guided_schema(request)

    assert _offered(guided)[0] == "list_dir" and "echo" not in _offered(guided) and "done" not in _offered(guided)
    path = guided["anyOf"][0]["properties"]["args"]["properties"]["path"]
    assert "reports" in path["enum"] and "hi" not in path["enum"]  # from the task, never from the user text
    listed = _ran("list_dir", {"path": "reports"}, "a.txt (1 bytes)")
    later = guided_schema(Request("S", "U", schema, task="List the folder reports", previous=listed))
    assert _offered(later)[-1] == "done"


@pytest.mark.parametrize(
    "task, previous",
    [(None, None), ("Update the scratchpad", None), ("Add the pending action 'x' to the queue", _ran("x", {}, "y"))],
)
def test_a_guided_model_is_never_offered_the_queue(task, previous):
    schema = _registry_schema()
    guided = guided_schema(Request("S", "U", schema, task=task, previous=previous))
    offered = [o for o in guided["anyOf"] if o["properties"]["tool"]["const"] == "update_scratchpad"]
    for option in offered:
        args = option["properties"]["args"]
        assert "pending_actions" not in args["properties"] and "goals" in args["properties"]
        assert args["additionalProperties"] is False  # so a reply that sends it anyway does not follow it
    assert offered or task  # with no task every tool stays on offer, update_scratchpad without the queue
    _compiles(guided)


def test_without_queue_leaves_every_other_tool_and_the_given_schema_as_they_are():
    schema = _registry_schema()
    kept = json.dumps(schema)
    narrowed = without_queue(schema)
    assert json.dumps(schema) == kept  # a copy: the registry's schema is untouched
    assert "pending_actions" in _args_of(schema, "update_scratchpad")
    assert set(_args_of(narrowed, "update_scratchpad")) == set(_args_of(schema, "update_scratchpad")) - {
        "pending_actions"
    }
    others = [o for o in schema["anyOf"] if o["properties"]["tool"]["const"] != "update_scratchpad"]
    assert [o for o in narrowed["anyOf"] if o["properties"]["tool"]["const"] != "update_scratchpad"] == others
    assert json.dumps(without_queue(schema)) == json.dumps(narrowed)  # the same every step: byte-stable


def _args_of(schema: dict, tool: str) -> dict:
    return next(o for o in schema["anyOf"] if o["properties"]["tool"]["const"] == tool)["properties"]["args"][
        "properties"
    ]


def _compiles(schema: dict) -> None:
    """The schema still becomes a llama.cpp grammar that llama.cpp accepts (when the runtime is installed)."""
    if local_runtime_installed():
        from llama_cpp import LlamaGrammar

        LlamaGrammar.from_json_schema(json.dumps(bounded_schema(schema)), verbose=False)


def test_a_first_steps_paths_and_contents_come_out_of_the_tasks_words():
    schema = _registry_schema()
    task = "Write hello world into greeting.txt"
    first = arguments_from_task(task, None, schema)

    assert _args_of(first, "write_file")["path"]["enum"] == ["greeting.txt", "."]  # the file the task names
    contents = _args_of(first, "write_file")["content"]["enum"]
    assert "hello world" in contents and "Hello, World!" not in contents
    assert _args_of(first, "append_file")["content"]["enum"] == contents
    assert "maxLength" not in _args_of(first, "write_file")["path"]
    # a folder the task names without an extension: any of its words, or the workspace itself
    assert task_paths("List the files in the folder inbox") == ["List", "the", "files", "in", "folder", "inbox", "."]
    assert "'second line'" not in task_spans("Append the line 'second line' to log.txt")
    assert "second line" in task_spans("Append the line 'second line' to log.txt")
    _compiles(first)


def test_once_something_was_found_paths_and_contents_are_the_models_again():
    schema = _registry_schema()
    read = _ran("read_file", {"path": "a.txt"}, "alpha")
    assert arguments_from_task("Copy a.txt into b.txt", read, schema) is schema
    assert arguments_from_task(None, None, schema) is schema


def test_task_words_that_could_be_grammar_syntax_are_never_offered_and_the_choices_stay_bounded():
    hostile = 'Write a"b and c\\d and \x1b[2J into out.txt'
    offered = task_spans(hostile) + task_paths(hostile)
    assert offered and not any(set(value) & {'"', "\\", "\x1b"} for value in offered)
    long_task = " ".join(f"w{n}" for n in range(500))
    spans = task_spans(long_task)
    assert len(spans) <= 40 * MAX_SPAN_WORDS and "w0" in spans and "w499" not in spans
    _compiles(arguments_from_task(long_task, None, _registry_schema()))


READ_INI = _ran(
    "read_file", {"path": "settings.ini"}, "[client]; timeout = 30; [server]; host = db.example.org; port = 5433"
)
LISTED = _ran("list_dir", {"path": "reports"}, "README.md (16 bytes); draft.txt (9 bytes); q3-sales.csv (22 bytes)")


def test_the_values_of_a_result_are_its_items_and_the_ones_that_share_a_word_with_the_task_come_alone():
    assert result_values(READ_INI, "Read settings.ini and note the port of the server") == ["port = 5433", "5433"]
    assert result_values(LISTED, "Find the CSV file in the folder reports") == ["q3-sales.csv"]
    # no item shares a word: every item is offered
    assert result_values(LISTED, "Note something") == ["README.md", "draft.txt", "q3-sales.csv"]
    # only a tool's result has values: not an error, not the first step
    assert result_values(NO_SUCH_FILE, "note it") == []
    assert result_values(None, "note it") == []


def test_result_text_that_could_be_grammar_syntax_is_never_offered():
    # a file's content reaches the grammar: quotes, backslashes, brackets, bars and stars are left out
    hostile = _ran("read_file", {"path": "x"}, 'a"b; c\\d; (e|f)*; g{1,9}; ok value; tab\there; ' + "x" * 81)
    assert result_values(hostile, "") == ["ok value"]


def test_when_the_last_step_found_values_done_must_start_with_one_of_them():
    schema = _registry_schema()
    task = "Read settings.ini and note the port of the server"
    shaped = summary_from_result(task, READ_INI, schema)

    pattern = _args_of(shaped, "done")["summary"]["pattern"]
    assert pattern.startswith("^(port = 5433|5433)[") and pattern.endswith("]{0,60}$")
    # only done is touched, and only when a tool returned values
    assert _args_of(shaped, "write_file") == _args_of(schema, "write_file")
    assert summary_from_result(task, NO_SUCH_FILE, schema) is schema
    _compiles(shaped)
    _compiles(summary_from_result("Find the CSV file", LISTED, schema))  # dots are written as [.]


def test_the_guided_schema_keeps_the_memory_sections_and_leaves_out_only_the_queue():
    sections = {"known": {"kind": "list", "limit": 3}, "purpose": {"kind": "text", "limit": 50, "read_only": True}}
    schema = without_queue(build_registry(Settings(sections=sections), entry_points=[]).action_schema())
    (update,) = [o for o in schema["anyOf"] if o["properties"]["tool"]["const"] == "update_scratchpad"]
    offered = update["properties"]["args"]["properties"]
    assert "known" in offered and "pending_actions" not in offered and "purpose" not in offered
