"""Finding the action in a reply: a size cap, and a search whose work grows linearly with the
reply however it is built (counted, not timed: CI machines are slow and busy)."""

from __future__ import annotations

import pytest

import agent.models.replies as replies
from agent.models.replies import DECODED_CHARS_PER_REPLY_CHAR, MAX_DECODE_ATTEMPTS, ReplyError, parse_reply
from tests.helpers import read_active, run_cli, tree_digest, write_active, write_script

ACTION = '{"tool": "echo", "args": {"message": "a } and a { in a string, and \\" an escaped quote"}}'


@pytest.fixture
def decoded(monkeypatch) -> list[int]:
    """The length of every span the search decodes."""
    spans: list[int] = []
    real = replies.decode_span

    def counting(span: str):
        spans.append(len(span))
        return real(span)

    monkeypatch.setattr(replies, "decode_span", counting)
    return spans


HOSTILE = {
    "open braces": "{" * 400_000,
    "fences": "```" * 133_000,
    "fence then whitespace": "```json" + " \n" * 200_000,
    "nested braces": "x" + "{" * 200_000 + "}" * 200_000,
    "empty objects": "x {}" * 100_000,
    "unclosed keys": 'x {"a": ' * 50_000,
}


@pytest.mark.parametrize("reply", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_400_kb_hostile_reply_fails_after_linear_work(reply, decoded):
    with pytest.raises(ReplyError):
        parse_reply(reply, max_bytes=None)
    assert len(decoded) <= max(MAX_DECODE_ATTEMPTS, reply.count("```"))
    assert sum(decoded) <= (DECODED_CHARS_PER_REPLY_CHAR + 1) * len(reply)


def test_an_action_after_unbalanced_prose_braces_and_quotes_is_found(decoded):
    reply = 'Thinking {about "it}. Then I said "hi {' + " x" * 1000 + "\nAction: " + ACTION + " and }"
    assert parse_reply(reply)["args"]["message"].startswith("a } and a {")


def test_braces_and_escaped_quotes_inside_strings_do_not_split_an_object_in_prose():
    assert parse_reply("Here you go: " + ACTION + " (done)")["tool"] == "echo"


def test_a_reply_over_max_reply_bytes_is_refused_naming_its_size_before_any_parsing(decoded):
    reply = ACTION + " " * 70_000
    with pytest.raises(ReplyError, match=r"reply is 70,\d{3} bytes, over the 65,536-byte limit \(max_reply_bytes\)"):
        parse_reply(reply, max_bytes=65536)
    assert decoded == []
    assert parse_reply(reply, max_bytes=None)["tool"] == "echo"


def test_the_cap_counts_utf8_bytes_not_characters():
    reply = '{"tool": "echo", "args": {"message": "' + "é" * 40_000 + '"}}'  # 40,000 chars, 80,000 bytes
    with pytest.raises(ReplyError, match="over the 65,536-byte limit"):
        parse_reply(reply, max_bytes=65536)


def test_raw_control_characters_inside_json_strings_are_accepted_as_the_field_writes_them():
    reply = '{"tool": "write_file", "args": {"path": "hello.txt", "content": "Hello!\nSecond line\tend\n"}}'
    assert parse_reply(reply)["args"]["content"] == "Hello!\nSecond line\tend\n"
    assert parse_reply(f"Here it is:\n```json\n{reply}\n```")["args"]["content"] == "Hello!\nSecond line\tend\n"
    assert parse_reply(f"I will write it: {reply} and stop.")["args"]["path"] == "hello.txt"


def test_a_parse_error_shows_the_reply_with_its_control_characters_escaped():
    with pytest.raises(ReplyError) as refused:
        parse_reply('{"tool": "echo", "args": {"message": "one\ntwo"}\n\x1b[2J')
    message = str(refused.value)
    assert message.endswith('"message": "one\\ntwo"}\\n\\x1b[2J\'')
    assert "\n" not in message and "\x1b" not in message


@pytest.mark.parametrize(
    "reply, problem",
    [
        (None, "reply is not text: null"),
        ("  \n ", "reply is empty"),
        ("[" * 100_000 + "]" * 100_000, "reply JSON is nested too deeply"),
        ('{"tool": "done", "args": {"summary": "\\ud800"}}', "not valid Unicode"),
        ('```{"tool": "a"}``` and ```{"tool": "\\udfff"}```', "not valid Unicode"),  # any action, not just the first
        ("just prose", "no JSON object found in reply: 'just prose'"),
        ("[1, 2]", "reply is JSON but a list, not an object: '[1, 2]'"),
        ('{"args": {}}', 'JSON object has no "tool" key'),
        (
            '```json\n[1]\n``` then {"x": 1}',
            "reply is JSON but a list, not an object",
        ),  # a fence that decodes: no prose search
    ],
)
def test_a_reply_without_a_usable_action_is_refused_saying_why(reply, problem):
    with pytest.raises(ReplyError) as caught:
        parse_reply(reply)
    assert problem in str(caught.value)


def test_a_reply_of_json_that_is_no_object_is_a_parse_error_naming_its_kind_in_words(home, tmp_path):
    """The note reads `JSON but a list`, never Python's `list` or `int`; the cycle goes on to done."""
    write_active(home, "current_task: say hi\n")
    (home / "workspace").mkdir()
    script = write_script(tmp_path, ["[1, 2]", "7", {"tool": "done", "args": {"summary": "ok"}}])
    result = run_cli("run", "--home", str(home), "--model", f"scripted:{script}")
    assert result.exit_code == 0
    assert [line for line in result.stdout.splitlines() if "[PARSE ERROR]" in line] == [
        "  1/10 [PARSE ERROR] reply is JSON but a list, not an object: '[1, 2]'",
        "  2/10 [PARSE ERROR] reply is JSON but a number, not an object: '7'",
    ]
    assert read_active(home)["notes"].splitlines()[:2] == [
        "[PARSE ERROR] reply is JSON but a list, not an object: '[1, 2]'",
        "[PARSE ERROR] reply is JSON but a number, not an object: '7'",
    ]
    assert tree_digest(home / "workspace") == {}


def test_the_first_action_is_taken_from_fences_before_prose():
    reply = 'prose {"tool": "prose"} ```json\n{"note": 1}\n``` ```{"tool": "fenced"}```'
    assert parse_reply(reply) == {"tool": "fenced"}
    assert parse_reply('```[broken``` then {"tool": "prose", "args": {}}') == {"tool": "prose", "args": {}}
