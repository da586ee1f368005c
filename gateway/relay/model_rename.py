"""Rename the model at one JSON place of a frame, leaving every other byte as it was.

The same-dialect fast path shows the caller the model name it asked for, but it must not touch
anything else: a route whose upstream model is ``text`` or ``length`` once turned
``"type":"text"`` and ``"finish_reason":"length"`` into the route's name. So the rename is
structural — ``frame[key]`` or ``frame[parent][key]`` (a dialect's ``ModelPlace``) — yet stays a
byte splice, so the upstream's formatting (Gemini's spaces, Anthropic's padding) survives.

Cost per frame: for a nested place (Anthropic, Responses, Interactions: a few frames per stream
name the model) one substring test, and for the frames that name it a parse to find the value
and a parse of the spliced frame to prove the splice hit the place. For a top-level place (chat,
Gemini: every chunk) a cheap proof that the key sits at the top level, made once and then reused
while the frames repeat its text (two ``startswith``/``endswith`` and a splice per chunk: ≤ 0.6
µs more than the old blind ``str.replace``, bench/README.md). A frame that defeats both (a model
name written with escapes) is re-serialised: parsed-equal, formatting lost.

Why the proofs hold, for ``"key"`` followed by ``:`` and a string in valid JSON: one whose opening
quote follows ``{``, ``,`` or whitespace starts a string (an escaped quote follows a backslash),
and a string followed by ``:`` is a key. It sits at the top level when the text before it holds
one ``{`` and no ``[`` (only the frame's own opening brace), or when the text after it holds one
``}`` and no ``]`` (only the frame's closing brace) — brackets inside strings only make a proof
fail, never pass wrongly.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from gateway.dialects.base import ModelPlace

_KEY_BEFORE = frozenset(" \t\r\n,{")
_STRING_VALUE = r'"((?:[^"\\]|\\.)*)"'


class ModelRenamer:
    __slots__ = ("_key", "_parent", "_pattern", "_marker", "_caller", "_caller_json", "_caller_raw", "_head", "_tail")

    def __init__(self, place: ModelPlace, caller_model: str) -> None:
        self._key = place.key
        self._parent = place.parent
        self._pattern = re.compile(re.escape('"' + place.key + '"') + r"\s*:\s*" + _STRING_VALUE)
        self._marker = '"' + (place.parent or place.key) + '"'
        self._caller = caller_model
        self._caller_json = orjson.dumps(caller_model).decode()
        self._caller_raw = self._caller_json[1:-1]
        # The last proof, reused while frames repeat its text byte for byte (the chunks of one chat
        # or Gemini stream share their id, model and responseId). By what comes before: (the text
        # up to the value, the value and its closing quote, where that quote is, already the
        # caller's); by what comes after: (the key up to the value's end, the text after it, the
        # value's length, already the caller's).
        self._head: tuple[str, str, int, bool] | None = None
        self._tail: tuple[str, str, int, bool] | None = None

    def rename(self, data: str) -> str:
        """``data`` with the model at the place set to the caller's name (unchanged if absent)."""
        if self._parent is not None:
            return self._by_parsing(data) if self._marker in data else data
        head = self._head
        if head is not None and data.startswith(head[0]) and data.startswith(head[1], len(head[0])):
            return data if head[3] else head[0] + self._caller_raw + data[head[2] :]
        tail = self._tail
        if tail is not None and data.endswith(tail[1]):
            end = len(data) - len(tail[1])
            at = end - len(tail[0])
            if data.startswith(tail[0], at) and data[at - 1 : at] in _KEY_BEFORE:
                return data if tail[3] else data[: end - tail[2]] + self._caller_raw + tail[1]
        return self._prove(data)

    def _put(self, data: str, start: int, end: int) -> str:
        """``data`` with the string contents ``data[start:end]`` replaced by the caller's name."""
        if data[start:end] == self._caller_raw:
            return data
        return data[:start] + self._caller_raw + data[end:]

    def _prove(self, data: str) -> str:
        first = data.find(self._marker)  # '"key"': chat's model sits near the start, Gemini's near the end
        if first < 0:
            return data
        span = self._value_span(data, first)
        if (
            span is not None
            and data[first - 1 : first] in _KEY_BEFORE
            and data.find("[", 0, first) < 0
            and data.count("{", 0, first) == 1
        ):
            start, end = span
            self._head = (data[:start], data[start : end + 1], end, data[start:end] == self._caller_raw)
            return self._put(data, start, end)
        last = data.rfind(self._marker)
        if last != first:
            span = self._value_span(data, last)
        if (
            span is not None
            and data[last - 1 : last] in _KEY_BEFORE
            and data.find("]", span[1]) < 0
            and data.count("}", span[1]) == 1
        ):
            start, end = span
            self._tail = (data[last:end], data[end:], end - start, data[start:end] == self._caller_raw)
            return self._put(data, start, end)
        return self._by_parsing(data)

    def _value_span(self, data: str, at: int) -> tuple[int, int] | None:
        """The contents of the string value of the key at ``at``, without escapes (else None)."""
        i = at + len(self._marker)
        if data.startswith(':"', i):
            start = i + 2
        elif data.startswith(': "', i):  # Gemini's live API prints a space after the colon
            start = i + 3
        else:
            return None
        end = data.find('"', start)
        if end < 0 or data.find("\\", start, end) >= 0:
            return None
        return start, end

    def _holder(self, obj: Any) -> dict[str, Any] | None:
        if not isinstance(obj, dict):
            return None
        if self._parent is None:
            return obj
        inner = obj.get(self._parent)
        return inner if isinstance(inner, dict) else None

    def _by_parsing(self, data: str) -> str:
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            return data
        holder = self._holder(obj)
        value = holder.get(self._key) if holder is not None else None
        if holder is None or not isinstance(value, str) or value == self._caller:
            return data
        for match in self._pattern.finditer(data):
            if data[match.start() - 1 : match.start()] not in _KEY_BEFORE:
                continue
            try:
                if orjson.loads('"' + match.group(1) + '"') != value:
                    continue
                candidate = data[: match.start(1) - 1] + self._caller_json + data[match.end() :]
                check = self._holder(orjson.loads(candidate))
            except orjson.JSONDecodeError:
                continue
            if check is not None and check.get(self._key) == self._caller:
                return candidate
        holder[self._key] = self._caller  # the name was written with escapes: re-serialise
        return orjson.dumps(obj).decode()
