"""Read the objects of a large JSON array one at a time, so memory stays flat.

The array may be the whole document (Zipkin) or the value of a top-level key
(Jaeger's ``"data"``).  Objects are decoded with the C JSON decoder straight out
of a sliding text buffer; only one object and about one read chunk are held.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO, Any

CHUNK = 1 << 20
_decoder = json.JSONDecoder()
_SPACE = " \t\r\n"


class JSONStreamError(ValueError):
    """The document is not the array of objects expected."""


class _Buffer:
    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.text = ""
        self.pos = 0
        self.eof = False

    def fill(self) -> bool:
        if self.eof:
            return False
        chunk = self.stream.read(CHUNK)
        if not chunk:
            self.eof = True
            return False
        self.text = self.text[self.pos :] + chunk
        self.pos = 0
        return True

    def peek(self, skip: str) -> str:
        """The next character that is not in ``skip`` ('' at the end)."""
        while True:
            text, pos = self.text, self.pos
            while pos < len(text) and text[pos] in skip:
                pos += 1
            self.pos = pos
            if pos < len(text):
                return text[pos]
            if not self.fill():
                return ""

    def expect(self, token: str) -> None:
        self.peek(_SPACE)
        while len(self.text) - self.pos < len(token) and self.fill():
            pass
        if not self.text.startswith(token, self.pos):
            raise JSONStreamError(f"expected {token!r}")
        self.pos += len(token)


def iter_array(stream: IO[str], key: str | None = None) -> Iterator[Any]:
    """Yield each element of the top-level array (or of the array under ``{key: [...]}``)."""
    buffer = _Buffer(stream)
    if key is not None:
        buffer.expect("{")
        buffer.expect(json.dumps(key))
        buffer.expect(":")
    buffer.expect("[")
    while True:
        first = buffer.peek(_SPACE + ",")
        if first == "":
            raise JSONStreamError("the array is not closed (truncated file?)")
        if first == "]":
            return
        while True:
            try:
                value, end = _decoder.raw_decode(buffer.text, buffer.pos)
                break
            except json.JSONDecodeError as exc:
                if not buffer.fill():
                    raise JSONStreamError(f"invalid JSON: {exc.msg}") from None
        buffer.pos = end
        yield value
