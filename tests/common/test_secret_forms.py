"""The forms a secret takes in text (agent/common/secret_forms.py): each one decodes back to the
secret, and none is too short to match ordinary text."""

from __future__ import annotations

import base64
import json
from urllib.parse import unquote, unquote_plus

import pytest

from agent.common.secret_forms import MIN_FORM_LENGTH, base64_cores, forms

SECRET = "sk-Zq81/mN0+pL2 vX7cRt=é"


def test_every_form_is_long_enough_and_names_its_kind():
    found = forms(SECRET)
    assert all(len(text) >= MIN_FORM_LENGTH for text in found)
    assert set(found.values()) == {"raw", "JSON-escaped", "URL-encoded", "base64", "hex", "reversed"}
    assert "repr-escaped" in forms("tab\there-1234").values()  # repr differs from the text only with escapes
    assert found[SECRET] == "raw" and found[SECRET[::-1]] == "reversed"


def test_each_form_decodes_back_to_the_secret():
    for text, kind in forms(SECRET).items():
        if kind == "JSON-escaped":
            assert json.loads(f'"{text}"') == SECRET
        elif kind == "URL-encoded":
            assert SECRET in {unquote(text), unquote_plus(text), unquote(unquote(text))}
        elif kind == "hex":
            assert bytes.fromhex(text).decode() == SECRET


@pytest.mark.parametrize("alphabet", ["standard", "urlsafe"])
def test_a_base64_core_is_found_whatever_bytes_surround_the_secret(alphabet: str):
    encode = base64.urlsafe_b64encode if alphabet == "urlsafe" else base64.b64encode
    data = SECRET.encode()
    cores = base64_cores(data, alphabet)
    assert len(cores) == 3
    for before in (b"", b"x", b"\xff\xfe", b"hello there, ", b"four"):  # every alignment, any bytes
        for after in (b"", b"\x00", b"trailing"):
            stream = encode(before + data + after).decode()
            assert any(core in stream for core in cores), (before, after)


def test_a_secret_with_a_newline_inside_is_also_listed_line_by_line():
    found = forms("first-half-123\nsecond-half-456")
    assert found["first-half-123"] == "raw" and found["second-half-456"] == "raw"
    assert found["first-half-123\\nsecond-half-456"] in ("repr-escaped", "JSON-escaped")


def test_a_short_secret_has_no_form_shorter_than_the_minimum():
    found = forms("abcd")
    assert "abcd" not in found and "dcba" not in found  # four characters would match ordinary text
    assert all(len(text) >= MIN_FORM_LENGTH for text in found)  # the longer encodings still count
