"""Rename the model at one JSON place of a frame, leaving every other byte as it was.

The same-dialect fast path shows the caller the model name it asked for, but it must not touch
anything else: a route whose upstream model is ``text`` or ``length`` once turned
``"type":"text"`` and ``"finish_reason":"length"`` into the route's name. So the rename is
structural — ``frame[key]`` or ``frame[parent][key]`` (a dialect's ``ModelPlace``) — yet stays a
byte splice, so the upstream's formatting (Gemini's spaces, Anthropic's padding) survives.

Cost per frame: one substring test (most frames do not name the model at all); for a top-level
place (chat, Gemini: every chunk) one regex search and a cheap proof that the match sits at the
top level; otherwise (nested places: a few frames per stream) a parse to find the value, and a
parse of the spliced frame to prove the splice hit the place. A frame that defeats both (a model
name written with escapes) is re-serialised: parsed-equal, formatting lost.

Why the proofs hold, for a regex match ``"key"\\s*:\\s*"…"`` in valid JSON: a match whose opening
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
    __slots__ = ("_key", "_parent", "_pattern", "_marker", "_caller", "_caller_json", "_caller_raw")

    def __init__(self, place: ModelPlace, caller_model: str) -> None:
        self._key = place.key
        self._parent = place.parent
        self._pattern = re.compile('"' + re.escape(place.key) + r'"\s*:\s*' + _STRING_VALUE)
        self._marker = '"' + (place.parent or place.key) + '"'
        self._caller = caller_model
        self._caller_json = orjson.dumps(caller_model).decode()
        self._caller_raw = self._caller_json[1:-1]

    def rename(self, data: str) -> str:
        """``data`` with the model at the place set to the caller's name (unchanged if absent)."""
        if self._marker not in data:
            return data
        if self._parent is None:
            first = self._pattern.search(data)
            if first is None:
                return data
            if self._is_key(data, first.start()):
                start = first.start()
                if data.count("{", 0, start) == 1 and data.find("[", 0, start) < 0:
                    return self._splice(data, first)
                last = first
                while (following := self._pattern.search(data, last.end())) is not None:
                    last = following
                end = last.end()
                if self._is_key(data, last.start()) and data.count("}", end) == 1 and data.find("]", end) < 0:
                    return self._splice(data, last)
        return self._by_parsing(data)

    @staticmethod
    def _is_key(data: str, start: int) -> bool:
        return start > 0 and data[start - 1] in _KEY_BEFORE

    def _splice(self, data: str, match: re.Match[str]) -> str:
        if match.group(1) == self._caller_raw:
            return data
        return data[: match.start(1) - 1] + self._caller_json + data[match.end() :]

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
            if not self._is_key(data, match.start()):
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
