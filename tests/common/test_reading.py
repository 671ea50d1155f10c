"""Text as a person reads it (agent/common/reading.py): what the "says the same" rules compare."""

from __future__ import annotations

import pytest

from agent.common.reading import as_read, reads_empty

# each hides in "The NAS is at 10.0.0.5" without changing what a person reads
INVISIBLE = {
    "zero-width space": "\u200b",
    "combining grapheme joiner": "\u034f",
    "variation selector": "\ufe0f",
    "hangul choseong filler": "\u115f",
    "hangul filler": "\u3164",
    "braille blank": "\u2800",
    "halfwidth hangul filler": "\uffa0",
    "tag character": "\U000e0041",
}


@pytest.mark.parametrize("char", INVISIBLE.values(), ids=INVISIBLE.keys())
def test_an_invisible_code_point_reads_as_nothing(char):
    assert as_read(f"The NAS{char} is at 10.0.0.5{char}") == "The NAS is at 10.0.0.5"
    assert reads_empty(char * 3) and reads_empty(f" {char} ")


def test_a_no_break_space_and_runs_of_white_space_read_as_one_space():
    assert as_read("The\u00a0NAS \u3000 is\tat  10.0.0.5 ") == "The NAS is at 10.0.0.5"


def test_compatibility_forms_read_as_the_plain_ones():
    assert as_read("\uff34he \ufb01le") == "The file"  # a full-width T, the fi ligature


def test_what_a_person_can_read_is_kept():
    assert as_read("café 🙂 ключ") == "café 🙂 ключ" and not reads_empty("0")
