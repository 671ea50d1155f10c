"""The scripted model: replies from a file or from memory, replayed from the first every cycle."""

from __future__ import annotations

import pytest

from agent.common.outcomes import UsageError
from agent.config import Settings
from agent.cycle.run import run_cycle
from agent.models import Request, ScriptedModel, ScriptEnded
from agent.store.home import Home
from tests.helpers import read_yaml, write_active, write_script

ANY_REQUEST = Request(system="S", user="U", schema={"anyOf": []})


def test_replies_from_memory_are_sent_in_order_with_mappings_as_json():
    model = ScriptedModel.from_replies(["raw text", {"tool": "done", "args": {}}, 7])
    model.start(lambda message: None)

    texts = [model.complete(ANY_REQUEST).text for _ in range(3)]

    assert texts == ["raw text", '{"tool": "done", "args": {}}', "7"]
    assert model.name == "scripted"


def test_asking_past_the_end_of_the_script_raises_script_ended():
    model = ScriptedModel.from_replies(["only one"])
    model.start(lambda message: None)
    model.complete(ANY_REQUEST)

    with pytest.raises(ScriptEnded, match="only 1 replies and reply 2 was asked for"):
        model.complete(ANY_REQUEST)


def test_every_cycle_replays_the_script_from_its_first_reply():
    model = ScriptedModel.from_replies(["first", "second"])
    model.start(lambda message: None)
    model.complete(ANY_REQUEST)
    model.start(lambda message: None)
    assert model.complete(ANY_REQUEST).text == "first"


def test_a_script_file_replays_like_replies_from_memory(tmp_path):
    replies = [{"tool": "echo", "args": {"message": "hi"}}, "not json"]
    model = ScriptedModel(write_script(tmp_path, replies))

    assert model.replies == ScriptedModel.from_replies(replies).replies
    assert model.name == f"scripted:{tmp_path / 'script.yaml'}"


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "not found"),
        ("- [unclosed\n", "invalid YAML at line 2, column 1"),
        ("tool: done\n", "must hold a YAML list of replies, got a mapping"),
    ],
    ids=["missing", "invalid-yaml", "not-a-list"],
)
def test_an_unusable_script_file_is_a_usage_error(tmp_path, content, message):
    path = tmp_path / "script.yaml"
    if content is not None:
        path.write_text(content)
    with pytest.raises(UsageError, match=message):
        ScriptedModel(path)


def test_a_whole_cycle_runs_on_replies_from_memory_without_files_or_click(home):
    write_active(
        home,
        {
            "goals": [],
            "current_task": "Say hi",
            "pending_actions": [],
            "completed_tasks": [],
            "notes": "",
            "last_updated": None,
        },
    )
    model = ScriptedModel.from_replies(
        [{"tool": "echo", "args": {"message": "hi"}}, {"tool": "done", "args": {"summary": "said hi"}}]
    )

    report = run_cycle(Home.at(home), Settings(), model)

    assert (report.exit_code, report.stop_reason, report.iterations) == (0, "done", 2)
    assert read_yaml(home / "scratchpad" / "active.yaml")["current_task"] is None
