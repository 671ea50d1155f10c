"""The dispatcher: every branch, as pure state-in, state-out calls (no files, no model)."""

from __future__ import annotations

import json

import pytest

from agent.common.tags import Tag
from agent.config import Settings
from agent.cycle.dispatch import ReplyError, dispatch, parse_reply
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
        ("[1, 2, 3]", "JSON list, not an object"),
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


def test_a_guided_model_shown_the_queue_as_a_count_adds_to_it_and_never_replaces_it(ctx, registry):
    # a guided model sees "pending_actions: 2 more after this task", not the list: its update is
    # read as additions (the ones already queued, or the current task itself, are not repeated)
    before = state_with(current_task="Write banana into fruit.txt", pending_actions=["a", "b"])
    update = act("update_scratchpad", pending_actions=["c", "a", "Write banana into fruit.txt", "c"])

    after, outcome = dispatch(before, update, registry, ctx, guided=True)

    assert outcome.kind is Tag.UPDATE and after["pending_actions"] == ["a", "b", "c"]
    assert after["notes"] == "[UPDATE] pending_actions (1 added to the queue)"
    # the same reply from a model that was shown the list replaces it, as update_scratchpad says
    assert dispatch(before, update, registry, ctx)[0]["pending_actions"] == [
        "c",
        "a",
        "Write banana into fruit.txt",
        "c",
    ]
    # with no current task the guided model was shown the list too: its update is the new queue
    idle = state_with(pending_actions=["a", "b"])
    assert dispatch(idle, act("update_scratchpad", pending_actions=["b"]), registry, ctx, guided=True)[0][
        "pending_actions"
    ] == ["b"]


def test_a_guided_model_that_moves_its_task_back_to_the_queue_loses_nothing(ctx, registry):
    # current A, pending [B]; the model makes X current and queues A: A must not vanish
    before = state_with(current_task="A", pending_actions=["B"])
    update = act("update_scratchpad", current_task="X", pending_actions=["A"])

    after, outcome = dispatch(before, update, registry, ctx, guided=True)

    assert outcome.kind is Tag.UPDATE and after["current_task"] == "X" and after["pending_actions"] == ["B", "A"]


def test_a_guided_model_copying_the_count_line_it_was_shown_queues_nothing(ctx, registry):
    before = state_with(current_task="A", pending_actions=["B", "C"])
    after, outcome = dispatch(
        before, act("update_scratchpad", pending_actions=["2 more after this task", "B"]), registry, ctx, guided=True
    )
    assert after["pending_actions"] == ["B", "C"]
    assert outcome.note == "[UPDATE] pending_actions (nothing new for the queue)"


def test_additions_that_would_take_the_queue_over_the_field_cap_are_refused_whole(ctx, registry):
    before = state_with(current_task="t", pending_actions=["x" * 40_000], goals=["g"])
    update = act("update_scratchpad", pending_actions=["y" * 40_000], goals=["h"])

    after, outcome = dispatch(before, update, registry, ctx, guided=True)

    assert outcome.kind is Tag.TOOL_ERROR and "field 'pending_actions' would be" in outcome.note
    assert after["pending_actions"] == ["x" * 40_000] and after["goals"] == ["g"]
