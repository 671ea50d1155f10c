"""The worked examples are data: the packaged examples.yaml or the home's own, checked when read,
filtered by the tools the home offers, rendered as turns exactly like a real step's message."""

from __future__ import annotations

import json
import os

import pytest

from agent.common.outcomes import UsageError
from agent.common.tags import Tag
from agent.config import Settings
from agent.cycle import examples as worked
from agent.cycle.prompt import user_prompt, without_previous_note
from agent.models.base import Request, chat_messages, system_with_examples
from agent.state import fresh_state
from agent.tools import build_registry
from tests.cli.helpers import done
from tests.cycle.test_loop import cycle
from tests.helpers import run_cli, tree_digest, write_active, write_script


def _registry(**settings):
    return build_registry(Settings(**settings), entry_points=[])


def test_the_packaged_examples_all_load_and_render_like_a_real_step():
    examples = worked.packaged_examples()
    assert len(examples) >= 4
    turns = worked.turns(worked.offered(examples, _registry()))
    assert len(turns) == len(examples)  # every packaged example uses a built-in tool
    first_user, first_reply = turns[0]
    assert first_user == user_prompt(fresh_state() | {"current_task": examples[0]["task"]}, 1, 10)
    assert json.loads(first_reply) == examples[0]["action"]
    second = next(e for e in examples if "last_result" in e)
    (second_user, second_reply), previous = worked.turns([second])[0], worked.previous(second)
    state = fresh_state() | {"current_task": second["task"], "notes": previous.note}
    shown = without_previous_note(state, previous)  # as the step after that action: its note shown once
    assert second_user == user_prompt(shown, 2, 10, previous=previous)
    assert second_user.count(previous.note) == 1
    assert json.loads(second_reply) == second["action"]


def test_an_example_naming_a_tool_the_home_does_not_offer_is_left_out_by_its_action_or_its_last_result():
    examples = worked.packaged_examples()
    kept = worked.offered(examples, _registry(shell_policy="off"))
    assert kept and all(
        e["action"]["tool"] != "shell" and e.get("last_result", {}).get("tool") != "shell" for e in kept
    )
    assert len(kept) == len(examples) - 2  # the shell step and the done that follows its result
    assert "shell" not in worked.section(kept) and "shell" not in json.dumps(worked.turns(kept))


def test_the_examples_become_turns_and_with_no_turns_a_section_of_the_system_text():
    examples = worked.packaged_examples()[:2]
    request = Request("RULES\n", "now", {}, examples=worked.turns(examples), examples_text=worked.section(examples))
    messages = chat_messages(request)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert messages[0]["content"] == "RULES\n" and messages[-1]["content"] == "now"
    text = system_with_examples(request)
    assert text.startswith("RULES\n\n## Examples\n\nTask: Echo the words: see you soon\nLast result: none yet\n")
    assert system_with_examples(Request("RULES\n", "now", {})) == "RULES\n"


def test_an_examples_note_is_read_as_the_outcome_it_names():
    example = {"task": "t", "last_result": {"tool": "done", "note": "[CHECK FAILED] exit 1"}, "action": done("x")}
    assert worked.previous(example).kind is Tag.CHECK_FAILED
    assert "Now: The task's check failed" in worked.turns([example])[0][0]


def test_a_homes_examples_replace_the_packaged_ones_and_an_empty_list_sends_none(home):
    write_active(home, {"current_task": "t"})
    own = [{"task": "Say yes", "action": {"tool": "echo", "args": {"message": "yes"}}}]
    (home / "examples.yaml").write_text(json.dumps(own))
    _, requests = cycle(home, [done("ok")])
    assert len(requests[0].examples) == 1 and json.loads(requests[0].examples[0][1])["args"] == {"message": "yes"}
    (home / "examples.yaml").write_text("[]\n")
    _, requests = cycle(home, [done("ok")])
    assert requests[0].examples == () and requests[0].examples_text == ""


def test_the_examples_are_the_same_bytes_for_every_step_and_every_cycle(home):
    write_active(home, {"current_task": "t"})
    _, first = cycle(home, [{"tool": "echo", "args": {"message": "a"}}, done("ok")])
    write_active(home, {"current_task": "u"})
    _, second = cycle(home, [done("ok")])
    assert len({(r.system, r.examples, r.examples_text) for r in first + second}) == 1


@pytest.mark.parametrize(
    "text, says",
    [
        ("[unclosed", "invalid YAML"),
        ("task: not a list\n", "'examples' must be a list"),
        ("- {task: t}\n", "'examples[0]' is missing 'action'"),
        ("- {task: t, action: {tool: echo}}\n", "'examples[0].action' is missing 'args'"),
        ("- {task: t, action: {tool: echo, args: {}}, extra: 1}\n", "unexpected key 'extra'"),
        (
            "- {task: t, last_result: {tool: echo, note: 'no tag'}, action: {tool: done, args: {}}}\n",
            "starts with a tag",
        ),
        (
            "- {task: t, last_result: {tool: echo, note: '[WAKE] x'}, action: {tool: done, args: {}}}\n",
            "starts with a tag",
        ),
    ],
)
def test_a_bad_examples_file_exits_2_naming_the_file_and_what_is_wrong_and_writes_nothing(home, tmp_path, text, says):
    write_active(home, {"current_task": "t"})
    (home / "examples.yaml").write_text(text)
    digest = tree_digest(home)
    result = run_cli("run", "--home", str(home), "--model", f"scripted:{write_script(tmp_path, [done('ok')])}")
    assert result.exit_code == 2, result.output
    assert "examples.yaml" in result.stderr and says in result.stderr and "Traceback" not in result.output
    assert tree_digest(home) == digest


def test_an_examples_file_that_is_a_fifo_is_refused_not_waited_on(tmp_path):
    os.mkfifo(tmp_path / "examples.yaml")
    with pytest.raises(UsageError, match="named pipe"):
        worked.read_examples(tmp_path / "examples.yaml")
    assert worked.read_examples(tmp_path / "missing.yaml") == worked.packaged_examples()
