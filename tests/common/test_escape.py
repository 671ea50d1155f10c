"""Escaping model-written text for terminals and line logs."""

from __future__ import annotations

import json

from agent.common.escape import escape_controls, escape_json, escape_tree


def test_controls_are_shown_as_escapes_and_plain_text_is_untouched():
    assert escape_controls("plain text, tab\tkept") == "plain text, tab\tkept"
    assert escape_controls("\x1b]52;c;aGk=\x07") == "\\x1b]52;c;aGk=\\x07"  # OSC 52: the clipboard
    assert escape_controls("a\nb\rc") == "a\\nb\\rc"
    assert escape_controls("\u202eevil") == "\\u202eevil"  # a bidi override
    assert escape_controls("\x9b31m") == "\\x9b31m"  # C1 CSI
    assert escape_controls(42) == "42"


def test_newlines_may_be_kept_for_multi_line_fields():
    assert escape_controls("a\nb\x1b", keep_newlines=True) == "a\nb\\x1b"


def test_json_stays_the_same_data_without_anything_a_terminal_obeys():
    text = json.dumps({"k": "\x7f\u202e\x9b"}, ensure_ascii=False)
    escaped = escape_json(text)
    assert json.loads(escaped) == {"k": "\x7f\u202e\x9b"}
    assert not any(ch in escaped for ch in "\x7f\u202e\x9b")


def test_a_tree_is_escaped_keys_and_values_each_on_one_line():
    assert escape_tree({"a\x1b": ["x\ny", 3, None, {"k": "\x07"}]}) == {"a\\x1b": ["x\\ny", 3, None, {"k": "\\x07"}]}


def test_a_lone_surrogate_is_shown_as_an_escape_so_the_text_can_be_written():
    assert escape_controls("a\ud800b\udcff") == "a\\ud800b\\udcff"
    escape_controls("a\ud800b").encode("utf-8")
    assert escape_json('"x\udcff"') == '"x\\udcff"'
