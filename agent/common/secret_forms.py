"""The shapes a secret can take in text: itself, escaped the way libraries print it, and encoded
the way a hostile model could smuggle it out (URL-encoding, base64, hex, reversed).

`forms(secret)` lists them; `agent.secrets.Secrets` redacts every one and refuses URLs that
carry any one. Only forms at least `MIN_FORM_LENGTH` long are listed: a shorter fragment would
match ordinary text.
"""

from __future__ import annotations

import base64
import json
import re
from urllib.parse import quote, quote_plus

MIN_FORM_LENGTH = 8

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def base64_cores(data: bytes, alphabet: str) -> list[str]:
    """The base64 text of `data` that does not depend on the bytes around it, for each of the
    three alignments `data` can have inside a longer encoded stream (so padding, or its absence,
    and any neighbouring bytes never hide it)."""
    encode = base64.urlsafe_b64encode if alphabet == "urlsafe" else base64.b64encode
    cores = []
    for pad in range(3):
        text = encode(b"\0" * pad + data).decode("ascii")
        first = -(-8 * pad // 6)  # first character made only of data bits
        last = (8 * (pad + len(data))) // 6  # one past the last such character
        cores.append(text[first:last])
    return cores


def forms(secret: str) -> dict[str, str]:
    """Every form of `secret` worth looking for, keyed by form text, valued by its kind."""
    data = secret.encode("utf-8")
    found: dict[str, str] = {}

    def add(text: str, kind: str) -> None:
        if len(text) >= MIN_FORM_LENGTH and text not in found:
            found[text] = kind

    add(secret, "raw")
    add(repr(secret)[1:-1], "repr-escaped")
    add(json.dumps(secret)[1:-1], "JSON-escaped")
    add(json.dumps(secret, ensure_ascii=True)[1:-1], "JSON-escaped")
    for piece in _CONTROL.split(secret):  # a value with a newline inside is also redacted line by line
        add(piece, "raw")
    add(quote(secret, safe=""), "URL-encoded")
    for hex_format in ("%{:02X}", "%{:02x}"):  # every byte encoded, either case, once and twice
        every_byte = "".join(hex_format.format(b) for b in data)
        add(every_byte, "URL-encoded")
        add(quote(every_byte, safe=""), "URL-encoded")
    add(quote_plus(secret, safe=""), "URL-encoded")
    for alphabet in ("standard", "urlsafe"):
        for core in base64_cores(data, alphabet):
            add(core, "base64")
    add(data.hex(), "hex")
    add(data.hex().upper(), "hex")
    add(secret[::-1], "reversed")
    return found
