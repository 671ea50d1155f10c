"""Finding any fragment of a secret, of `FRAGMENT` characters or more, in a text, in linear time.

A model that cannot print a key whole prints it in pieces (`head -c 20`, then `tail -c +21`),
each piece harmless-looking and each one a part of the key. So every run of `FRAGMENT` or more
characters that also occurs in a secret (in any of its forms) counts as the secret.

How: every `PROBE`-character window of every secret text is indexed in a dict. A fragment of
`FRAGMENT` characters holds `FRAGMENT - PROBE + 1` consecutive probe starts, so one of them falls
on a multiple of that number: the scan looks up only every STRIDE-th window of the text, and
extends each hit left and right against the secret it came from. Cost: len(text) / STRIDE dict
lookups, plus an extension (at most the secret's length) per hit. `bench/secret_fragments.py`
measures it on a 64 KB result.
"""

from __future__ import annotations

from typing import Iterable

FRAGMENT = 8  # the shortest piece of a secret that counts as the secret
PROBE = 4
STRIDE = FRAGMENT - PROBE + 1


class Fragments:
    """An index of secret texts; `spans(text)` are the parts of `text` that are pieces of one."""

    def __init__(self, texts: Iterable[str]):
        self.texts = [t for t in dict.fromkeys(texts) if len(t) >= FRAGMENT]
        self._index: dict[str, list[tuple[int, int]]] = {}
        for number, secret in enumerate(self.texts):
            for offset in range(len(secret) - PROBE + 1):
                self._index.setdefault(secret[offset : offset + PROBE], []).append((number, offset))

    def __bool__(self) -> bool:
        return bool(self.texts)

    def first(self, text: str) -> int | None:
        """The number of the secret text a fragment in `text` comes from, or None."""
        for _start, _end, number in self._hits(text, first=True):
            return number
        return None

    def spans(self, text: str) -> list[tuple[int, int]]:
        """The (start, end) ranges of `text` that are fragments of a secret, merged and sorted."""
        merged: list[list[int]] = []
        for start, end, _number in sorted(self._hits(text, first=False)):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        return [(start, end) for start, end in merged]

    def redact(self, text: str, replacement: str) -> str:
        spans = self.spans(text) if self._index else []
        if not spans:
            return text
        out, at = [], 0
        for start, end in spans:
            out += [text[at:start], replacement]
            at = end
        out.append(text[at:])
        return "".join(out)

    def _hits(self, text: str, first: bool):
        """(start, end, secret number) of each fragment found, extended as far as it matches."""
        seen: set[tuple[int, int]] = set()
        for probe in range(0, len(text) - PROBE + 1, STRIDE):
            for number, offset in self._index.get(text[probe : probe + PROBE], ()):
                start, end = _extend(text, probe, self.texts[number], offset)
                if end - start >= FRAGMENT and (start, end) not in seen:
                    seen.add((start, end))
                    yield start, end, number
                    if first:
                        return


def _extend(text: str, at: int, secret: str, offset: int) -> tuple[int, int]:
    """The widest range around text[at:at + PROBE] that matches `secret` around `offset`."""
    start, left = at, offset
    while start > 0 and left > 0 and text[start - 1] == secret[left - 1]:
        start, left = start - 1, left - 1
    end, right = at + PROBE, offset + PROBE
    while end < len(text) and right < len(secret) and text[end] == secret[right]:
        end, right = end + 1, right + 1
    return start, end
