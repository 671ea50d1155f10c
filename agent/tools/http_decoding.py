"""Bounded decoding of an http_get body: decoded bytes are capped, and decoding stops at the cap.

A 2.6 KB response compressed twice can decode to gigabytes; a decoder that inflates a whole
network chunk before anyone checks the size runs the agent out of memory. Here every layer
inflates at most `STEP` bytes at a time and the last one at most what is left of the cap, so
memory stays near `cap + layers * STEP` whatever the server sends.

The content encodings decoded (`Content-Encoding`, in the order the server applied them):
`gzip` (also `x-gzip`) and `deflate` (zlib-wrapped, as HTTP defines it), at most `MAX_LAYERS`
of them; `identity` counts for nothing. Anything else is refused (http_get asks for
`identity`, so a server that sends another encoding ignored the request).
"""

from __future__ import annotations

import zlib

from agent.tools.base import ToolError

DECODED = ("gzip", "x-gzip", "deflate")
MAX_LAYERS = 2
STEP = 64 * 1024  # bytes an inner layer inflates at a time


def layers(content_encoding: str | None) -> list[str]:
    """The encodings to undo, outermost first; a ToolError for an unknown one or too many."""
    applied = [c.strip().lower() for c in (content_encoding or "").split(",")]
    applied = [c for c in applied if c and c != "identity"]
    for coding in applied:
        if coding not in DECODED:
            raise ToolError(
                f"the response's content encoding {coding[:40]!r} is not supported "
                f"(http_get decodes {', '.join(DECODED)}, at most {MAX_LAYERS} layers)"
            )
    if len(applied) > MAX_LAYERS:
        raise ToolError(f"the response has {len(applied)} content encodings; http_get decodes at most {MAX_LAYERS}")
    return applied[::-1]


class BoundedDecoder:
    """Undo `codings` (outermost first) on a stream of raw chunks, giving out at most `limit`
    decoded bytes in all; `full` once the limit is reached (the caller stops reading)."""

    def __init__(self, codings: list[str], limit: int):
        # wbits 47: a zlib or a gzip header, whichever the stream has
        self._layers = [zlib.decompressobj(wbits=47) for _ in codings]
        self.left = limit

    @property
    def full(self) -> bool:
        return self.left <= 0 or (bool(self._layers) and self._layers[-1].eof)

    def feed(self, raw: bytes) -> bytes:
        try:
            out = self._through(0, raw, self.left)
        except zlib.error as exc:
            raise ToolError(f"the response body could not be decoded: {exc}") from None
        self.left -= len(out)
        return out

    def _through(self, depth: int, data: bytes, budget: int) -> bytes:
        """`data` decoded by the layers from `depth` on: at most `budget` bytes."""
        if depth == len(self._layers):
            return data[:budget]
        layer, last = self._layers[depth], depth == len(self._layers) - 1
        out, produced, pending = [], 0, data
        while produced < budget and not layer.eof:
            limit = budget - produced if last else STEP
            step = layer.decompress(pending, limit)
            pending = layer.unconsumed_tail
            piece = step if last else self._through(depth + 1, step, budget - produced)
            out.append(piece)
            produced += len(piece)
            if not pending and len(step) < limit:  # input used up and nothing held back
                break
            if any(inner.eof for inner in self._layers[depth + 1 :]):  # nothing more can come out
                break
        return b"".join(out)
