"""Finding pieces of a secret in a text (agent/common/secret_fragments.py): every run of FRAGMENT
or more characters shared with a secret, at any offset, and nothing shorter."""

from __future__ import annotations

from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from agent.common.secret_fragments import FRAGMENT, Fragments

SECRET = "sk-live-7Hq2ZxP9wLm4Rt8Vb3Nc6Ys1KdJ0Fg5A"
OTHER = "dpl-Qm3Wx8Ez5Rt2Yu7Io4Pa9Sd"


def test_texts_shorter_than_a_fragment_are_not_indexed():
    index = Fragments(["short", SECRET, SECRET])
    assert index.texts == [SECRET] and index
    assert not Fragments(["1234567"]) and Fragments([]).redact("anything 1234567", "X") == "anything 1234567"


def test_a_piece_of_exactly_fragment_characters_is_found_and_one_less_is_not():
    index = Fragments([SECRET])
    for start in range(len(SECRET) - FRAGMENT + 1):
        piece = SECRET[start : start + FRAGMENT]
        assert index.spans(f"xx {piece} yy") == [(3, 3 + FRAGMENT)], start
        assert index.spans(f"xx {piece[:-1]} yy") == [], start


def test_overlapping_and_adjacent_pieces_merge_into_one_span():
    index = Fragments([SECRET, OTHER])
    text = SECRET[:12] + OTHER[:10]
    assert index.spans(text) == [(0, len(text))]
    assert index.redact(f"a {text} b", "[R]") == "a [R] b"


def test_first_names_the_secret_a_piece_comes_from():
    index = Fragments([SECRET, OTHER])
    assert index.first(f"log: {OTHER[5:15]}") == 1
    assert index.first(f"log: {SECRET[20:30]}") == 0
    assert index.first("nothing here at all") is None


def test_a_hostile_text_of_repeated_probes_stays_correct():
    index = Fragments(["aaaaaaaaaaaa"])  # every probe window is the same
    text = "b" + "a" * 10_000 + "b"
    assert index.spans(text) == [(1, 10_001)]
    assert index.redact(text, "X") == "bXb"


@hsettings(max_examples=200, deadline=None)
@given(
    before=st.text(max_size=40),
    after=st.text(max_size=40),
    start=st.integers(0, len(SECRET) - FRAGMENT),
    extra=st.integers(0, 30),
)
def test_the_piece_is_always_inside_a_span(before: str, after: str, start: int, extra: int):
    piece = SECRET[start : start + FRAGMENT + extra]
    text = before + piece + after
    spans = Fragments([SECRET]).spans(text)
    assert any(s <= len(before) and len(before) + len(piece) <= e for s, e in spans)
    assert spans == sorted(spans) and all(e1 < s2 for (_, e1), (s2, _) in zip(spans, spans[1:]))
