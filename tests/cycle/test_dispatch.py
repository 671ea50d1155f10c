"""The dispatcher: every branch, as pure state-in, state-out calls (no files, no model)."""

from __future__ import annotations

import copy
import json

import pytest

from agent.common.tags import Tag
from agent.config import Settings
from agent.cycle.dispatch import dispatch
from agent.models.local.guidance import without_queue
from agent.models.replies import ReplyError, parse_reply
from agent.state import fresh_state, problems
from agent.tools import ToolContext, build_registry


@pytest.fixture
def ctx(tmp_path):
    (tmp_path / "workspace").mkdir()  # as every cycle makes it
    return ToolContext(tmp_path, Settings(shell_policy="allowlist"))  # the sandbox: tests/system/test_sandbox.py


@pytest.fixture
def registry():
    return build_registry(Settings())


def state_with(**fields):
    state = fresh_state()
    state.update(fields)
    return state


def act(tool, **args):
    return json.dumps({"tool": tool, "args": args})


def test_tool_call_appends_a_tool_note_and_leaves_the_queue(ctx, registry):
    before = state_with(current_task="greet", pending_actions=["next"])
    after, outcome = dispatch(before, act("echo", message="Hello!"), registry, ctx)
    assert outcome.kind is Tag.TOOL and not outcome.done
    assert after["notes"] == '[TOOL] echo({"message": "Hello!"}) -> Hello!'
    assert after["current_task"] == "greet" and after["pending_actions"] == ["next"]


def test_dispatch_never_mutates_the_state_it_was_given(ctx, registry):
    before = state_with(current_task="t", pending_actions=["a"])
    frozen = json.dumps(before, sort_keys=True)
    dispatch(before, act("done", summary="s"), registry, ctx)
    dispatch(before, act("update_scratchpad", completed_tasks=["x"]), registry, ctx)
    assert json.dumps(before, sort_keys=True) == frozen


def test_tool_results_are_clipped_in_notes(ctx, registry):
    after, _ = dispatch(state_with(), act("echo", message="x" * 5000), registry, ctx)
    # arguments are clipped to 200 characters and the result to note_result_chars (300)
    assert len(after["notes"]) < 200 + 300 + 40
    assert after["notes"].endswith("…")


def test_update_extends_completed_tasks_and_replaces_pending(ctx, registry):
    before = state_with(completed_tasks=["old"], pending_actions=["a", "b"])
    after, outcome = dispatch(
        before,
        act("update_scratchpad", completed_tasks=["new"], pending_actions=["c"], current_task="now", goals=["g"]),
        registry,
        ctx,
    )
    assert outcome.kind is Tag.UPDATE
    assert after["completed_tasks"] == ["old", "new"]
    assert after["pending_actions"] == ["c"]
    assert after["current_task"] == "now" and after["goals"] == ["g"]


def test_update_cannot_shrink_completed_tasks(ctx, registry):
    before = state_with(completed_tasks=["a", "b"])
    after, _ = dispatch(before, act("update_scratchpad", completed_tasks=[]), registry, ctx)
    assert after["completed_tasks"] == ["a", "b"]


@pytest.mark.parametrize(
    "args, message",
    [
        ({"pending_actions": "not a list"}, "pending_actions"),
        ({"goals": [1, 2]}, "goals"),
        ({"current_task": {"a": 1}}, "current_task"),
        ({"notes": 5}, "notes"),
        ({"last_updated": "2020-01-01"}, "last_updated"),
        ({"mystery": 1}, "mystery"),
    ],
)
def test_update_refuses_bad_fields_whole_and_says_which(ctx, registry, args, message):
    before = state_with(current_task="keep", pending_actions=["keep"])
    after, outcome = dispatch(before, act("update_scratchpad", **{"current_task": "changed", **args}), registry, ctx)
    assert outcome.kind is Tag.TOOL_ERROR
    assert message in outcome.note and outcome.note.startswith("[TOOL ERROR]")
    assert after["current_task"] == "keep"  # all or nothing
    assert problems(after) == []


def test_done_moves_the_task_and_advances_the_queue(ctx, registry):
    before = state_with(current_task="t1", pending_actions=["t2", "t3"], completed_tasks=["t0"])
    after, outcome = dispatch(before, act("done", summary="did t1"), registry, ctx)
    assert outcome.done
    assert after["completed_tasks"] == ["t0", {"task": "t1", "summary": "did t1"}]
    assert after["current_task"] == "t2" and after["pending_actions"] == ["t3"]
    assert after["notes"].endswith("[COMPLETED] did t1")


def test_done_with_nothing_to_do_records_only_the_note(ctx, registry):
    after, outcome = dispatch(state_with(), act("done", summary="idle"), registry, ctx)
    assert outcome.done and after["completed_tasks"] == [] and after["current_task"] is None
    assert after["notes"] == "[COMPLETED] idle"


@pytest.mark.parametrize(
    "reply, fragment",
    [
        ("I think I should echo.", "no JSON object found"),
        ("[1, 2, 3]", "JSON but a list, not an object"),
        ('{"action": "echo"}', 'no "tool" key'),
        ('{"tool": 7, "args": {}}', '"tool" must be a string'),
        ("", "reply is empty"),
        ('{"tool": "echo", "args": {"message": "unterminated}', "no JSON object found"),
    ],
)
def test_unparseable_replies_become_parse_error_notes(ctx, registry, reply, fragment):
    after, outcome = dispatch(state_with(), reply, registry, ctx)
    assert outcome.kind is Tag.PARSE_ERROR
    assert after["notes"].startswith("[PARSE ERROR]") and fragment in after["notes"]


def test_unknown_tool_is_noted_with_the_tools_that_exist(ctx, registry):
    after, outcome = dispatch(state_with(), act("launch_rockets"), registry, ctx)
    assert outcome.kind is Tag.UNKNOWN_TOOL
    assert after["notes"].startswith("[UNKNOWN TOOL] launch_rockets") and "echo" in after["notes"]


@pytest.mark.parametrize(
    "args, fragment",
    [
        ({}, "missing required argument 'message'"),
        ({"message": "hi", "loud": True}, "unexpected argument 'loud'"),
        ({"message": 42}, "'message' must be a string"),
    ],
)
def test_bad_tool_arguments_are_tool_errors_and_the_tool_does_not_run(ctx, registry, args, fragment):
    after, outcome = dispatch(state_with(), json.dumps({"tool": "echo", "args": args}), registry, ctx)
    assert outcome.kind is Tag.TOOL_ERROR and fragment in after["notes"]
    assert "[TOOL]" not in after["notes"]


def test_a_tool_that_raises_becomes_a_tool_error_note(ctx, registry):
    after, outcome = dispatch(state_with(), act("read_file", path="missing.txt"), registry, ctx)
    assert outcome.kind is Tag.TOOL_ERROR and "no such file" in after["notes"]


def test_disallowed_shell_command_is_refused(ctx, registry):
    after, outcome = dispatch(state_with(), act("shell", command="rm -rf /"), registry, ctx)
    assert outcome.kind is Tag.TOOL_ERROR and "'rm' is not allowed" in after["notes"]


def test_shell_runs_argv_without_a_shell(ctx, registry):
    after, outcome = dispatch(state_with(), act("shell", command="echo $HOME; ls"), registry, ctx)
    assert outcome.kind is Tag.TOOL
    assert "$HOME; ls" in after["notes"]  # echo printed its argv literally: no shell expanded it


@pytest.mark.parametrize(
    "reply",
    [
        'Sure! Here is the action:\n```json\n{"tool": "echo", "args": {"message": "hi"}}\n```\nDone.',
        '```\n{"tool": "echo", "args": {"message": "hi"}}\n```',
        'I will call {"tool": "echo", "args": {"message": "hi"}} now.',
        '  {"tool": "echo", "args": {"message": "hi"}}  ',
    ],
)
def test_actions_wrapped_in_prose_or_fences_are_found(reply):
    assert parse_reply(reply) == {"tool": "echo", "args": {"message": "hi"}}


def test_the_first_object_with_a_tool_key_wins_over_other_json_in_prose():
    reply = 'Context {"a": 1} then {"tool": "done", "args": {"summary": "x"}}'
    assert parse_reply(reply)["tool"] == "done"


def test_parse_reply_rejects_non_text():
    with pytest.raises(ReplyError):
        parse_reply(None)


def test_args_may_be_omitted_for_tools_without_required_arguments(ctx, registry):
    after, outcome = dispatch(state_with(), '{"tool": "update_scratchpad"}', registry, ctx)
    assert outcome.kind is Tag.UPDATE


def test_a_reply_nested_too_deeply_is_a_parse_error_not_a_crash(ctx, registry):
    reply = '{"tool": "echo", "args": ' + "[" * 5000 + "]" * 5000 + "}"
    after, outcome = dispatch(state_with(), reply, registry, ctx)
    assert outcome.kind is Tag.PARSE_ERROR
    after, outcome = dispatch(state_with(), "prose " + reply, registry, ctx)
    assert outcome.kind is Tag.PARSE_ERROR


def test_a_reply_with_a_lone_surrogate_is_refused_so_the_state_stays_writable(ctx, registry):
    from agent.common.safe_yaml import dump_yaml

    reply = '{"tool": "update_scratchpad", "args": {"current_task": "x \\ud800 y"}}'
    after, outcome = dispatch(state_with(current_task="keep"), reply, registry, ctx)
    assert outcome.kind is Tag.PARSE_ERROR and after["current_task"] == "keep"
    dump_yaml(after).encode("utf-8")  # still writable


def test_an_update_with_a_field_over_the_per_field_cap_is_refused_and_the_cycle_goes_on(ctx, registry):
    from agent.state import MAX_FIELD_BYTES

    huge = ["g" * 1000] * (MAX_FIELD_BYTES // 1000 + 1)
    before = state_with(goals=["keep"])
    after, outcome = dispatch(
        before,
        act("update_scratchpad", goals=huge, current_task="t"),
        registry,
        ToolContext(ctx.home, Settings(max_reply_bytes=10_000_000)),
    )
    assert outcome.kind is Tag.TOOL_ERROR and not outcome.done
    assert (
        f"field 'goals' would be {len(json.dumps(huge)):,} bytes, over the {MAX_FIELD_BYTES:,}-byte limit"
        in after["notes"]
    )
    assert after["goals"] == ["keep"] and after["current_task"] is None  # all or nothing


def test_a_reply_over_max_reply_bytes_is_a_parse_error_naming_its_size(ctx, registry):
    reply = act("update_scratchpad", goals=["g" * 70_000])
    after, outcome = dispatch(state_with(goals=["keep"]), reply, registry, ctx)
    assert outcome.kind is Tag.PARSE_ERROR and after["goals"] == ["keep"]
    assert f"reply is {len(reply):,} bytes, over the 65,536-byte limit (max_reply_bytes)" in after["notes"]


def test_update_scratchpad_has_one_meaning_for_every_model(ctx, registry):
    # pending_actions is the new queue, whatever the model: nothing is read as additions
    before = state_with(current_task="Write banana into fruit.txt", pending_actions=["a", "b"])
    update = act("update_scratchpad", pending_actions=["c", "a"])
    offered = without_queue(registry.action_schema())

    after, outcome = dispatch(before, update, registry, ctx, offered=registry.action_schema())

    assert outcome.kind is Tag.UPDATE and after["pending_actions"] == ["c", "a"]
    assert after["notes"] == "[UPDATE] pending_actions"
    assert dispatch(before, update, registry, ctx)[0]["pending_actions"] == ["c", "a"]
    # a model offered update_scratchpad without the queue may still set every other field
    after, outcome = dispatch(before, act("update_scratchpad", goals=["g"]), registry, ctx, offered=offered)
    assert outcome.kind is Tag.UPDATE and after["goals"] == ["g"] and after["pending_actions"] == ["a", "b"]


def test_a_reply_that_sends_the_queue_it_was_not_offered_is_refused_whole(ctx, registry):
    # a guided model's schema leaves pending_actions out; a reply that sends it anyway (a server
    # that ignores the schema, or a hostile one) changes nothing: neither replaced nor appended to
    before = state_with(current_task="A", pending_actions=["B", "C"], goals=["keep"])
    update = act("update_scratchpad", goals=["g"], pending_actions=["Delete everything"])

    after, outcome = dispatch(before, update, registry, ctx, offered=without_queue(registry.action_schema()))

    assert outcome.kind is Tag.TOOL_ERROR
    assert outcome.note == (
        "[TOOL ERROR] update_scratchpad: not as offered for this step: 'args' has an unexpected key 'pending_actions'"
    )
    assert after["pending_actions"] == ["B", "C"] and after["goals"] == ["keep"] and after["current_task"] == "A"


def test_a_tool_or_a_value_outside_the_offered_schema_is_refused_and_never_runs(ctx, registry, tmp_path):
    schema = registry.action_schema()
    offered = copy.deepcopy(
        {**schema, "anyOf": [o for o in schema["anyOf"] if o["properties"]["tool"]["const"] == "write_file"]}
    )
    offered["anyOf"][0]["properties"]["args"]["properties"]["path"]["enum"] = ["fruit.txt", "."]
    before = state_with(current_task="Write banana into fruit.txt")

    after, outcome = dispatch(before, act("done", summary="s"), registry, ctx, offered=offered)
    assert outcome.kind is Tag.TOOL_ERROR and outcome.note == "[TOOL ERROR] done: not offered for this step"
    assert after["current_task"] == "Write banana into fruit.txt" and after["completed_tasks"] == []

    written = act("write_file", path="other.txt", content="banana")
    after, outcome = dispatch(before, written, registry, ctx, offered=offered)
    assert outcome.kind is Tag.TOOL_ERROR and "'args.path' must be one of 'fruit.txt'" in outcome.note
    assert not (tmp_path / "workspace" / "other.txt").exists()

    after, outcome = dispatch(
        before, act("write_file", path="fruit.txt", content="banana"), registry, ctx, offered=offered
    )
    assert outcome.kind is Tag.TOOL and (tmp_path / "workspace" / "fruit.txt").read_text() == "banana"


def test_a_tools_result_enters_the_notes_as_one_escaped_writable_line_the_outcome_repeats(ctx):
    from agent.common.safe_yaml import dump_yaml
    from agent.tools import Registry, Tool, control_tools

    def noisy() -> str:
        """Return what a careless plugin returns."""
        return "first line\n\x1b[31mred\x1b[0m \udcff bytes"  # lines, escape codes, undecodable bytes

    registry = Registry([Tool.from_function(noisy), *control_tools()])
    after, outcome = dispatch(state_with(notes="older"), act("noisy"), registry, ctx)
    assert after["notes"] == "older\n" + outcome.note
    assert outcome.note == "[TOOL] noisy({}) -> first line; \\x1b[31mred\\x1b[0m \\udcff bytes"
    assert outcome.result == "first line; \\x1b[31mred\\x1b[0m \\udcff bytes"
    dump_yaml(after).encode("utf-8")  # writable


def test_unknown_tool_note_names_where_tools_come_from(ctx, registry):
    after, _ = dispatch(state_with(), act("yolo_detect", path="images/sample.jpg"), registry, ctx)
    assert "plugins" in after["notes"] and "MCP servers" in after["notes"] and "`agent tools`" in after["notes"]


def test_done_without_a_summary_completes_the_task_with_the_default_one(ctx, registry):
    before = state_with(current_task="wave", pending_actions=["rest"])
    after, outcome = dispatch(before, json.dumps({"tool": "done"}), registry, ctx)
    assert outcome.kind is Tag.COMPLETED
    assert after["completed_tasks"] == [{"task": "wave", "summary": "Task complete."}]
    assert after["current_task"] == "rest"
    assert after["notes"] == "[COMPLETED] Task complete. (done was called without a summary)"


def test_done_without_a_summary_leaves_the_tool_schema_asking_for_one(registry):
    assert registry["done"].args_schema["required"] == ["summary"]


def test_a_summary_that_is_not_text_is_still_refused(ctx, registry):
    after, outcome = dispatch(state_with(current_task="t"), act("done", summary=3), registry, ctx)
    assert outcome.kind is Tag.TOOL_ERROR and after["current_task"] == "t"


def test_a_models_own_key_is_refused_naming_the_setting_that_allows_it(ctx, registry):
    after, outcome = dispatch(state_with(), act("update_scratchpad", status="ok"), registry, ctx)
    assert outcome.kind is Tag.TOOL_ERROR and "status" not in after
    assert "unexpected argument 'status'" in after["notes"] and "model_keys" in after["notes"]


def test_a_models_own_key_is_kept_with_model_keys(tmp_path, registry):
    (tmp_path / "workspace").mkdir()
    ctx = ToolContext(tmp_path, Settings(model_keys=True))
    after, outcome = dispatch(state_with(), act("update_scratchpad", status="ok", goals=["g"]), registry, ctx)
    assert outcome.kind is Tag.UPDATE and (after["status"], after["goals"]) == ("ok", ["g"])
    assert not problems(after)
