"""A value as a person reads it: `plain` for showing one, `described` and `kind` for naming one a
message refuses, never a Python repr or type name."""

from __future__ import annotations

import datetime as dt

import pytest

from agent.common.plain import counted, described, kind


def test_described_clips_long_text():
    text = described("x" * 200)
    assert text.startswith('the text "xxx') and text.endswith('..."') and len(text) < 75


@pytest.mark.parametrize(
    "value, words",
    [
        ({"a": 1}, "a mapping of 1 key"),
        (["a", "b"], "a list of 2 items"),
        ("x", 'the text "x"'),
        ("it's", 'the text "it\'s"'),
        (3, "the number 3"),
        (2.5, "the number 2.5"),
        (True, "true"),
        (False, "false"),
        (None, "null"),
        (dt.date(2026, 1, 2), "the date 2026-01-02"),
        (dt.datetime(2026, 1, 2, 3, 4, 5), "the date and time 2026-01-02T03:04:05"),
    ],
)
def test_described_names_a_value_in_words(value, words):
    assert described(value) == words


def test_a_value_of_no_json_kind_is_named_without_its_python_type():
    assert described(b"bytes") == kind(object()) == "a value of another kind"


@pytest.mark.parametrize(
    "value, words",
    [({}, "a mapping"), ((1,), "a list"), ("", "text"), (0, "a number"), (False, "a boolean"), (None, "null")],
)
def test_kind_names_a_value_s_kind_in_words(value, words):
    assert kind(value) == words


@pytest.mark.parametrize(
    ("count", "one", "many", "said"),
    [
        (1, "line", "", "1 line"),
        (0, "line", "", "0 lines"),
        (1, "entry", "entries", "1 entry"),
        (2, "entry", "entries", "2 entries"),
    ],
)
def test_a_count_takes_its_noun_in_the_number_it_needs(count, one, many, said):
    assert counted(count, one, many) == said
