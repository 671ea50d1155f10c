"""The model interface: what a request carries, the messages built from it, what a completion says."""

from __future__ import annotations

import dataclasses
import json

from agent.common.tags import Outcome, Tag
from agent.models.base import (
    Completion,
    Notice,
    Request,
    ToolCall,
    Usage,
    chat_messages,
    system_with_examples,
    with_notices,
)

SCHEMA = {"anyOf": []}
TURNS = (("Task: say hi", '{"tool": "echo", "args": {"message": "hi"}}'), ("Task: stop", '{"tool": "done"}'))


def test_the_examples_become_turns_between_the_system_text_and_the_step():
    messages = chat_messages(Request("rules", "now", SCHEMA, examples=TURNS))
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert messages[0]["content"] == "rules" and messages[-1]["content"] == "now"
    assert [m["content"] for m in messages[1:5]] == [text for turn in TURNS for text in turn]


def test_without_examples_a_request_is_system_and_user_only():
    assert chat_messages(Request("rules", "now", SCHEMA)) == [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": "now"},
    ]
    assert system_with_examples(Request("rules\n", "now", SCHEMA)) == "rules\n"


def test_a_model_sent_no_turns_gets_the_examples_in_its_system_text():
    request = Request("rules\n\n", "now", SCHEMA, examples=TURNS, examples_text="## Examples\n\nTask: say hi")
    assert system_with_examples(request) == "rules\n\n## Examples\n\nTask: say hi"


def test_a_request_survives_the_trip_to_the_embedded_models_child_process():
    previous = Outcome(Tag.TOOL, '[TOOL] echo({"message": "hi"}) -> hi', "echo", {"message": "hi"}, "hi")
    request = Request("rules", "now", SCHEMA, task="say hi", previous=previous, examples=TURNS, timeout=3.5)
    over_the_pipe = json.loads(json.dumps(dataclasses.asdict(request)))  # tuples arrive as lists
    again = Request.from_fields(over_the_pipe)
    assert again.previous == previous and again.task == "say hi" and again.timeout == 3.5
    assert again.previous.kind is Tag.TOOL  # a guided model tells a tool's result by `is Tag.TOOL`
    assert chat_messages(again) == chat_messages(request)
    assert Request.from_fields(json.loads(json.dumps(dataclasses.asdict(Request("s", "u", SCHEMA))))).previous is None


def test_usage_adds_up_and_reports_its_total():
    total = Usage()
    total.add(Usage(prompt_tokens=10, completion_tokens=2, cached_tokens=4, calls=1))
    total.add(Usage(prompt_tokens=5, completion_tokens=1, calls=1))
    assert total.as_dict() == {
        "prompt_tokens": 15,
        "completion_tokens": 3,
        "cached_tokens": 4,
        "total_tokens": 18,
        "calls": 2,
    }


def test_a_completion_is_cut_only_when_the_endpoint_says_length():
    assert Completion("{", finish_reason="length", limit=512).cut_at == 512
    assert Completion("{}", finish_reason="stop", limit=512).cut_at is None
    assert Completion("{}", limit=512).cut_at is None


def test_native_calls_are_dispatched_one_by_one_and_shown_as_sent():
    calls = [ToolCall("c1", "echo", '{"message": "hi"}'), ToolCall("c2", 7, "not json")]  # hostile name kept as is
    completion = Completion("ignored text", calls=calls)
    assert completion.replies() == calls
    shown = json.loads(completion.shown)
    assert shown[1] == {"id": "c2", "type": "function", "function": {"name": 7, "arguments": "not json"}}
    assert Completion('{"tool": "done"}').replies() == ['{"tool": "done"}']  # no calls: the text is the action


def test_a_notice_is_logged_like_any_line_and_also_handed_on():
    logged, notified = [], []
    log = with_notices(logged.append, notified.append)
    log("loaded the model")
    log(Notice("preparing the model"))
    assert logged == ["loaded the model", "preparing the model"] and notified == ["preparing the model"]
    assert type(notified[0]) is str
