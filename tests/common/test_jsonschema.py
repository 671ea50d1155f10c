"""The JSON Schema subset: what matches, the messages for what does not, schemas from annotations."""

from __future__ import annotations

from typing import Any

import pytest

from agent.common.jsonschema import check, schema_for, type_name

STRINGS = {"type": "array", "items": {"type": "string"}}


@pytest.mark.parametrize(
    "value, schema, problem",
    [
        ("a", {"type": "string"}, None),
        (1, {"type": "string"}, "'x' must be a string, got the number 1"),
        (True, {"type": "integer"}, "'x' must be an integer, got true"),
        (1.5, {"type": "number"}, None),
        (None, {"type": ["string", "null"]}, None),
        (["a", 2], STRINGS, "'x[1]' must be a string, got the number 2"),
        ({"a": 1}, {"type": "object", "additionalProperties": False}, "'x' has an unexpected key 'a'"),
        ({}, {"type": "object", "required": ["k"]}, "'x' is missing 'k'"),
        (
            {"k": 1},
            {"type": "object", "properties": {"k": {"type": "string"}}},
            "'x.k' must be a string, got the number 1",
        ),
        ({1: "a"}, {"type": "object"}, "'x' has a key that is not a string: 1"),
        (
            {"a": 1},
            {"type": "object", "additionalProperties": {"type": "string"}},
            "'x.a' must be a string, got the number 1",
        ),
        ({"a": 1}, {"type": "object", "required": ["k"], "additionalProperties": False}, "'x' is missing 'k'"),
        (
            [{"k": "v"}, {"k": 2}],
            {"items": {"properties": {"k": {"type": "string"}}}},
            "'x[1].k' must be a string, got the number 2",
        ),
        ("c", {"enum": ["a", "b"]}, "'x' must be one of 'a', 'b', got the text \"c\""),
        ("b", {"const": "a"}, "'x' must be 'a', got the text \"b\""),
        (3, {"anyOf": [{"type": "string"}, {"type": "null"}]}, "'x' must be a string or null, got the number 3"),
    ],
)
def test_check_names_the_path_and_the_expected_type(value, schema, problem):
    assert check(value, schema, "x") == problem


def test_without_a_path_the_value_is_named_plainly():
    assert check(1, {"type": "string"}) == "value must be a string, got the number 1"
    assert check({"k": 1}, {"additionalProperties": {"type": "string"}}) == "'k' must be a string, got the number 1"


@pytest.mark.parametrize(
    "schema, name",
    [
        (STRINGS, "list of strings"),
        ({"type": ["string", "null"]}, "string or null"),
        ({"type": "object"}, "mapping"),
        ({}, "value"),
        ({"type": "array"}, "list of values"),
    ],
)
def test_type_names_read_as_words(schema, name):
    assert type_name(schema) == name


@pytest.mark.parametrize(
    "annotation, schema",
    [
        (str, {"type": "string"}),
        (int | None, {"type": ["integer", "null"]}),
        (list[str], STRINGS),
        (dict[str, float], {"type": "object", "additionalProperties": {"type": "number"}}),
        (Any, {}),
        (str | int, {"anyOf": [{"type": "string"}, {"type": "integer"}]}),
        (list[str] | None, {"type": ["array", "null"], "items": {"type": "string"}}),
    ],
)
def test_schema_for_annotations(annotation, schema):
    assert schema_for(annotation) == schema


def test_an_unsupported_annotation_is_a_type_error():
    with pytest.raises(TypeError, match="unsupported parameter type"):
        schema_for(bytes)
