"""What an MCP server lists and returns, as this agent's tools (agent/tools/mcp_convert.py): names,
schemas, results and the launch command, each read from a server or config that may be hostile.
Real servers are run in tests/tools/test_mcp.py."""

from __future__ import annotations

import json
import os
import sys

import pytest

from agent.config import Settings
from agent.tools import TOOL_NAME, Tool, ToolError, mcp_convert
from agent.tools.mcp_convert import (
    args_schema_of,
    launch_command,
    one_line,
    readable_schema,
    result_text,
    server_env,
    tool_name,
)


@pytest.mark.parametrize(
    "server, remote, expected",
    [
        ("time", "get_current_time", "time__get_current_time"),
        ("my-server", "get.time now", "my_server__get_time_now"),
        ("s", "ünïcode-tööl", "s___n_code_t__l"),
    ],
)
def test_mcp_tool_names_are_prefixed_and_fit_the_tool_name_pattern(server, remote, expected):
    assert tool_name(server, remote) == expected


def test_long_mcp_tool_names_are_cut_and_stay_distinct():
    first, second = tool_name("server", "a" * 100 + "1"), tool_name("server", "a" * 100 + "2")
    assert TOOL_NAME.fullmatch(first) and TOOL_NAME.fullmatch(second) and first != second


HOSTILE_SCHEMAS = [
    None,
    [],
    "string",
    42,
    {},
    {"type": "object"},
    {"type": "object", "properties": []},
    {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "required": ["a", "missing", 3]},
    {"type": "object", "properties": {"a": {"type": "frobnicate"}, "b": {"type": ["string", 7]}}},
    {"type": "object", "properties": {"a": {"items": [{"type": "string"}], "type": "array"}}},
    {"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}, {"not": {}}]}}},
    {"type": "object", "properties": {"a": {"anyOf": []}, "b": {"enum": []}, "c": {"type": []}}},
    {"type": "object", "properties": {"ctx": {"type": "string"}, "": {"type": "integer"}}},
    {"type": "object", "properties": {"a": {"allOf": [{"type": "string"}], "minLength": 2, "format": "uri"}}},
]


def _nested(depth: int) -> dict:
    node: dict = {"type": "string"}
    for _ in range(depth):
        node = {"type": "object", "properties": {"a": node}}
    return node


@pytest.mark.parametrize("input_schema", HOSTILE_SCHEMAS + [_nested(200)])
def test_any_input_schema_gives_a_usable_tool_without_crashing(input_schema):
    schema = args_schema_of(input_schema)
    tool = Tool("srv__t", "a tool", schema, lambda ctx, **kw: "ok", source="mcp:srv")
    tool.signature(), tool.prompt_line(), json.dumps(tool.action_schema())
    for args in ({}, {"a": "x"}, {"a": 1}, {"a": {"b": [1]}}, {"ctx": "x"}, {"": 1}, {"zzz": 1}, [], "x"):
        problem = tool.check_args(args)
        assert problem is None or isinstance(problem, str)


def test_what_the_checker_can_read_is_kept_and_checked():
    schema = args_schema_of(
        {
            "type": "object",
            "required": ["tz", "n"],
            "properties": {
                "tz": {"type": "string", "description": "a zone"},
                "n": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                "mode": {"enum": ["a", "b"]},
                "ref": {"$ref": "#/$defs/X"},
            },
        }
    )
    tool = Tool("s__t", "d", schema, None)
    assert tool.signature() == "s__t(tz: string, n: integer or null, mode?: value, ref?: value)"
    assert tool.check_args({"tz": "UTC", "n": None}) is None
    assert "must be a string" in tool.check_args({"tz": 5, "n": 1})
    assert "must be one of 'a', 'b'" in tool.check_args({"tz": "UTC", "n": 1, "mode": "c"})
    assert tool.check_args({"tz": "UTC", "n": 1, "ref": {"anything": ["goes"]}}) is None
    assert "unexpected argument 'other'" in tool.check_args({"tz": "UTC", "n": 1, "other": 1})


def test_results_become_text_and_are_capped():
    assert result_text({"content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]}) == "one\ntwo"
    assert result_text({"content": [], "structuredContent": {"a": 1}}) == '{"a": 1}'
    assert (
        result_text({"content": [{"type": "image", "data": "AAAA", "mimeType": "image/png"}]})
        == "[image image/png content not shown]"
    )
    assert result_text({"content": [{"type": "resource", "resource": {"uri": "file:///x", "text": "body"}}]}) == "body"
    assert result_text({"content": ["junk", {"type": "resource_link", "uri": "file:///y"}]}).endswith(
        "[resource link file:///y]"
    )
    big = result_text({"content": [{"type": "text", "text": "x" * 100_000}]})
    assert len(big) < 66_000 and big.endswith(f"[result cut at {mcp_convert.MAX_RESULT_CHARS} characters]")


def test_readable_schema_keeps_nothing_it_cannot_check():
    assert readable_schema({"type": "string", "pattern": "^a", "$ref": "x", "format": "uri"}) == {"type": "string"}
    assert readable_schema({"oneOf": [{"type": "string"}, {"type": "integer"}]}) == {
        "anyOf": [{"type": "string"}, {"type": "integer"}]
    }
    assert readable_schema({"anyOf": [{"type": "string"}, {"pattern": "^a"}]}) == {}  # one option accepts anything
    assert readable_schema({"type": ["string", "nope"], "enum": [], "required": ["a", 1]}) == {"required": ["a"]}
    assert readable_schema({"additionalProperties": True}) == {}
    assert readable_schema({"additionalProperties": {"type": "string"}}) == {"additionalProperties": {"type": "string"}}


def test_a_hostile_server_schema_nested_without_end_is_cut_at_the_depth_cap():
    deep: dict = {"type": "string"}
    for _ in range(100_000):
        deep = {"type": "array", "items": deep}
    reduced, levels = readable_schema(deep), 0
    while "items" in reduced:
        reduced, levels = reduced["items"], levels + 1
    assert levels == mcp_convert.MAX_SCHEMA_DEPTH + 1 and reduced == {}


def test_a_server_command_is_found_like_a_shell_would_and_wrapped_to_die_with_the_agent(tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "plain.txt").write_text("not a program")
    argv = launch_command("python3", ["-m", "x"], {"PATH": os.environ["PATH"]}, tmp_path)
    assert argv[:2] == [sys.executable, "-I"] and argv[-3:-2][0].endswith("/python3") and argv[-2:] == ["-m", "x"]
    with pytest.raises(ToolError, match="command not found: no-such-program"):
        launch_command("no-such-program", [], {"PATH": os.environ["PATH"]}, tmp_path)
    with pytest.raises(ToolError, match="cannot run bin/plain.txt: .* is not executable"):
        launch_command("bin/plain.txt", [], {}, tmp_path)  # a relative path is relative to the home


def test_a_server_env_takes_referenced_variables_and_marks_credentials_secret(monkeypatch):
    monkeypatch.setenv("UPSTREAM_TOKEN", "tok-0123456789")
    monkeypatch.setenv("PLAIN_VALUE", "just text")
    spec = {
        "env": {
            "API": "${UPSTREAM_TOKEN}",  # secret by the name it was taken from
            "GITHUB_TOKEN": "literal-token-value",  # secret by its own name
            "REGION": "${PLAIN_VALUE}",
            "MODE": "fast",
            "NAMED": "named-by-operator",
            "HALF": "x${PLAIN_VALUE}",  # not a whole reference: taken as written
        }
    }
    env, secrets = server_env(spec, Settings(secret_env=["NAMED"]))
    assert env == {
        "API": "tok-0123456789",
        "GITHUB_TOKEN": "literal-token-value",
        "REGION": "just text",
        "MODE": "fast",
        "NAMED": "named-by-operator",
        "HALF": "x${PLAIN_VALUE}",
    }
    assert secrets == ["tok-0123456789", "literal-token-value", "named-by-operator"]
    assert server_env({}, Settings()) == ({}, [])


def test_a_reference_to_an_unset_variable_is_a_tool_error_naming_both(monkeypatch):
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    with pytest.raises(ToolError, match="env KEY: the variable NOT_SET_ANYWHERE is not set"):
        server_env({"env": {"KEY": "${NOT_SET_ANYWHERE}"}}, Settings())


def test_descriptions_are_one_clipped_line():
    assert one_line("a\n\tb\r\n  c", 100) == "a b c"
    assert one_line("x" * 10, 5) == "xxxx…"
    schema = readable_schema({"type": "string", "description": "line one\nline two " + "y" * 1000})
    assert "\n" not in schema["description"] and len(schema["description"]) == mcp_convert.MAX_DESCRIPTION_CHARS


def test_odd_result_items_are_text_never_a_crash():
    odd = {"content": [{"type": "text"}, {"type": "resource", "resource": "not a dict"}, {"no": "type"}, 7, None]}
    assert result_text(odd).splitlines() == [
        "",
        "[resource ? not shown]",
        "[None  content not shown]",
        "[None  content not shown]",
        "[None  content not shown]",
    ]
    assert result_text({}) == "" and result_text({"content": None, "structuredContent": None}) == ""
