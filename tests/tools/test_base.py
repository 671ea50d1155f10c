"""Tool: one typed definition each, from which the prompt line, schema and validation come."""

from __future__ import annotations

import json

import pytest

from agent.common.tags import Tag
from agent.cycle.dispatch import dispatch
from agent.state import fresh_state
from agent.tools import CONTROL_TOOLS, Registry, Tool, control_tools
from tests.tools.helpers import call, ctx_for


def recorder():
    calls = []

    def stamp(ctx, label: str, count: int, loud: bool = False) -> str:
        """Stamp a label a number of times.

        Args:
            label: the text to stamp
            count: how many stamps
        """
        calls.append((label, count, loud))
        return "ok"

    return stamp, calls


def test_prompt_line_schema_and_validation_all_come_from_the_function():
    stamp, _ = recorder()
    tool = Tool.from_function(stamp)
    assert tool.args_schema == {
        "type": "object",
        "properties": {
            "label": {"type": "string", "description": "the text to stamp"},
            "count": {"type": "integer", "description": "how many stamps"},
            "loud": {"type": "boolean"},
        },
        "required": ["label", "count"],
        "additionalProperties": False,
    }
    assert (
        tool.prompt_line() == "- stamp(label: string, count: integer, loud?: boolean): Stamp a label a number of times."
    )
    assert tool.action_schema()["properties"]["args"] is tool.args_schema
    assert tool.check_args({"label": "a", "count": 1}) is None


def test_an_example_is_shown_in_the_prompt_line_as_a_whole_reply():
    stamp, _ = recorder()
    tool = Tool.from_function(stamp, example={"label": "x", "count": 2})
    assert tool.prompt_line().splitlines()[1] == '  example: {"tool": "stamp", "args": {"label": "x", "count": 2}}'


@pytest.mark.parametrize(
    "args, problem",
    [
        ({"label": "a"}, "missing required argument 'count'"),
        ({"label": "a", "count": 1, "colour": "red"}, "unexpected argument 'colour'"),
        ({"label": "a", "count": "3"}, "'count' must be an integer, got the text \"3\""),
        ({"label": "a", "count": True}, "'count' must be an integer, got true"),
        ({"label": 5, "count": 1}, "'label' must be a string, got the number 5"),
        (["a", 1], "args must be a JSON object"),
    ],
)
def test_bad_arguments_are_a_tool_error_naming_the_problem_and_the_tool_does_not_run(tmp_path, args, problem):
    stamp, calls = recorder()
    registry = Registry([Tool.from_function(stamp)])
    reply = json.dumps({"tool": "stamp", "args": args})
    after, outcome = dispatch(fresh_state(), reply, registry, ctx_for(tmp_path))
    assert outcome.kind is Tag.TOOL_ERROR
    assert outcome.note.startswith("[TOOL ERROR] stamp: ") and problem in outcome.note
    assert after["notes"] == outcome.note
    assert calls == []


def test_plain_functions_without_a_context_are_tools_too(tmp_path):
    def twice(text: str) -> str:
        """Say it twice."""
        return text * 2

    tool = Tool.from_function(twice)
    assert list(tool.args_schema["properties"]) == ["text"]
    assert tool.func.__name__ == "twice" and tool.func.__doc__ == "Say it twice."
    assert call(ctx_for(tmp_path), "twice", Registry([tool]), text="ab") == (
        Tag.TOOL,
        '[TOOL] twice({"text": "ab"}) -> abab',
    )


@pytest.mark.parametrize(
    "source, message",
    [
        ("def f(ctx, x: str):\n    return x\n", "needs a docstring"),
        ("def f(ctx, x):\n    '''Doc.'''\n", "parameter 'x' needs a type annotation"),
        ("def f(ctx, x: dict):\n    '''Doc.'''\n", "parameter 'x': unsupported parameter type"),
        ("def f(ctx, *xs: str):\n    '''Doc.'''\n", "*args/**kwargs"),
        ("def f(ctx, x: 'Nowhere'):\n    '''Doc.'''\n", "tool f: cannot read its type annotations: name 'Nowhere'"),
        ("def f(x: str, **more: str):\n    '''Doc.'''\n", "tool f: *args/**kwargs"),
    ],
)
def test_functions_that_cannot_be_described_are_rejected_with_the_reason(source, message):
    namespace: dict = {}
    exec(source, namespace)
    with pytest.raises(TypeError, match=message.replace("*", r"\*")):
        Tool.from_function(namespace["f"])


def test_a_registry_refuses_two_tools_with_one_name():
    stamp, _ = recorder()
    with pytest.raises(ValueError, match="two tools are named 'stamp'"):
        Registry([Tool.from_function(stamp), Tool.from_function(stamp)])


def test_control_tools_are_run_by_the_dispatcher_and_update_only_model_fields():
    tools = control_tools()
    assert [t.name for t in tools] == list(CONTROL_TOOLS) and all(t.func is None for t in tools)
    writable = tools[0].args_schema["properties"]
    assert "current_task" in writable and "last_updated" not in writable


def test_what_is_not_a_function_or_has_a_bad_name_is_rejected():
    with pytest.raises(TypeError, match="a tool must be a function, got the number 3"):
        Tool.from_function(3)
    with pytest.raises(TypeError, match="tool name 'no-dash' must be letters, digits and underscores"):
        Tool.from_function(lambda: None, name="no-dash")


def test_the_schema_takes_descriptions_from_args_and_requires_what_has_no_default():
    def look(ctx, path: str, limit: int = 5, *, deep: bool = False) -> str:
        """Look at a path.

        Args:
            path: where to look
            deep: go into folders
        """

    schema = Tool.from_function(look).args_schema
    assert schema["required"] == ["path"]
    assert schema["properties"] == {
        "path": {"type": "string", "description": "where to look"},
        "limit": {"type": "integer"},
        "deep": {"type": "boolean", "description": "go into folders"},
    }


def test_update_scratchpad_offers_the_writable_sections_from_their_specs():
    import json

    from agent.models.openai.tool_calls import function_tools
    from agent.setting_checks import section_specs
    from agent.state import taken_keys

    specs = section_specs(
        {
            "known": {"kind": "list", "limit": 30, "description": "Facts I am sure of."},
            "purpose": {"kind": "text", "limit": 600, "read_only": True},
            "now": {"kind": "text", "limit": 200},
        },
        taken_keys(),
    )
    update = control_tools(specs)[0]
    assert list(update.args_schema["properties"])[-2:] == ["now", "known"]  # after the fields, most stable first
    assert "purpose" not in update.args_schema["properties"]  # read-only: never offered
    assert update.check_args({"known": "APPEND: the NAS is at 10.0.0.5", "now": "CLEAR"}) is None
    assert update.check_args({"known": ["APPEND: x"]}) == "'known' must be a string, got a list of 1 item"
    (function,) = [
        f
        for f in function_tools(Registry(control_tools(specs)).action_schema())
        if f["function"]["name"] == "update_scratchpad"
    ]
    assert function["function"]["parameters"]["properties"]["known"]["description"].startswith(
        "Facts I am sure of. List"
    )
    assert json.dumps(control_tools(specs)[0].args_schema) == json.dumps(update.args_schema)  # byte-stable
    assert control_tools(())[0].args_schema == control_tools()[0].args_schema  # no sections: as before


@pytest.mark.embedded_model
def test_the_embedded_models_grammar_is_derived_from_a_schema_with_sections():
    import json

    from llama_cpp import LlamaGrammar

    from agent.models.local.model import bounded_schema
    from agent.setting_checks import section_specs
    from agent.state import taken_keys

    specs = section_specs({"known": {"kind": "list", "limit": 30}, "now": {"kind": "text", "limit": 200}}, taken_keys())
    schema = Registry(control_tools(specs)).action_schema()
    grammar = LlamaGrammar.from_json_schema(json.dumps(bounded_schema(schema)), verbose=False)
    assert 'args-known-kv ::= "\\"known\\"" space ":"' in grammar._grammar  # the section is a key it may write
    assert 'args-now-kv ::= "\\"now\\"" space ":"' in grammar._grammar
