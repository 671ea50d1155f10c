"""Hardened YAML and the text-file reader under it: every refusal is a clear error, never a hang or crash."""

from __future__ import annotations

import os
import re

import pytest
import yaml

from agent.common.safe_yaml import (
    MAX_ALIAS_EXPANSION,
    MAX_YAML_DEPTH,
    FileRefused,
    dump_yaml,
    load_yaml,
    read_text_file,
    yaml_problem,
)


def _problem(text: str) -> str:
    with pytest.raises(yaml.YAMLError) as caught:
        load_yaml(text)
    return yaml_problem(caught.value)


def test_plain_yaml_loads_and_notes_dump_as_literal_blocks():
    data = load_yaml("goals: [a, b]\nnotes: |\n  one\n  two\n")
    assert data == {"goals": ["a", "b"], "notes": "one\ntwo\n"}
    assert "notes: |" in dump_yaml(data)
    assert load_yaml(dump_yaml(data)) == data


def test_a_duplicate_key_is_refused():
    assert "duplicate" in _problem("a: 1\na: 2\n")


def test_tags_that_build_objects_are_refused():
    assert "YAML tags that build objects are not allowed" in _problem("!!python/object/apply:os.system ['true']\n")


def test_deep_nesting_is_refused_before_anything_is_built():
    assert f"nested more than {MAX_YAML_DEPTH} levels deep" in _problem("[" * 100_000)


def test_an_alias_bomb_and_a_recursive_alias_are_refused():
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(6)
    )
    assert f"over {MAX_ALIAS_EXPANSION:,} more values" in _problem(bomb)
    assert "inside its own anchor" in _problem("a: &a [*a]\n")


def test_aliases_within_the_limit_load_and_scalar_aliases_count_too():
    assert load_yaml("a: &s x\nb: &l [*s, *s]\nc: [*l, *s]\n") == {"a": "x", "b": ["x", "x"], "c": [["x", "x"], "x"]}
    many = "a: &s x\nb: [" + ", ".join(["*s"] * (MAX_ALIAS_EXPANSION + 10)) + "]\n"
    assert f"over {MAX_ALIAS_EXPANSION:,} more values" in _problem(many)


def test_a_value_yaml_cannot_build_is_a_yaml_error():
    assert "a value cannot be read" in _problem("when: 2024-02-30\n")


def test_yaml_problem_says_where():
    assert _problem("a: [1, 2\n").startswith("invalid YAML at line ")


def test_read_text_file_reads_text_and_says_none_when_missing(tmp_path):
    (tmp_path / "f").write_text("hé")
    assert read_text_file(tmp_path / "f", "scratchpad", 100) == "hé"
    assert read_text_file(tmp_path / "missing", "scratchpad", 100) is None


@pytest.mark.parametrize(
    "make, problem",
    [
        (lambda p: p.mkdir(), "is a directory, not a file"),
        (lambda p: os.mkfifo(p), "is not a regular file but a named pipe (FIFO)"),
        (lambda p: p.write_bytes(b"\xff\xfe"), "UTF-8"),
        (lambda p: p.write_text("x" * 101), "100"),
    ],
)
def test_read_text_file_refuses_what_is_not_small_regular_utf8_text(tmp_path, make, problem):
    path = tmp_path / "f"
    make(path)
    with pytest.raises(FileRefused, match=re.escape(problem)) as caught:
        read_text_file(path, "scratchpad", 100)
    assert caught.value.path == path
