"""Where an OpenAI chat stream names its model and states its stop reason (the same-dialect fast path).

Every chunk names the model at its top level (``model``; Azure's filter-annotation chunk sends it
empty). A chunk with a non-null ``finish_reason`` states the stop reason; it (and the usage chunk
after it) is held until ``data: [DONE]``, so a stream cut there does not look finished.

Usage rides in a chunk of its own (``"choices": []``), which the gateway always asks the upstream
for: it is dropped when the caller did not ask (clients that index ``choices[0]`` break on it), and
written from the decoded usage when the caller asked but the upstream put its usage elsewhere (on
the finish chunk, as some compatible servers do), so the stream ends as OpenAI's does.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from gateway.dialects.base import FastPathRules, ModelPlace
from gateway.events import Usage
from gateway.framing.sse import encode_frame

from .usage import render_usage as to_chat

_NULL_FINISH = re.compile(r'"finish_reason"\s*:\s*null')


def carries_stop(event: str | None, data: str) -> bool:
    return '"finish_reason"' in data and '"finish_reason":null' not in data and not _NULL_FINISH.search(data)


_EMPTY_CHOICES = re.compile(r'"choices"\s*:\s*\[\s*\]')
_NULL_USAGE = re.compile(r'"usage"\s*:\s*null')


class UsageChunks:
    def is_usage_chunk(self, data: str) -> bool:
        """A ``choices: []`` chunk with a usage object. The common chunk (compact JSON with
        ``"usage":null``) is told apart by two substring checks; the regexes only confirm the rest."""
        if '"usage"' not in data or '"usage":null' in data:
            return False
        return _EMPTY_CHOICES.search(data) is not None and _NULL_USAGE.search(data) is None

    def usage_chunk(self, last_chunk: str, caller_model: str, usage: Usage) -> bytes:
        """The usage chunk the upstream did not send (id and created from the last chunk forwarded)."""
        try:
            last = orjson.loads(last_chunk) if last_chunk else {}
        except orjson.JSONDecodeError:
            last = {}
        last = last if isinstance(last, dict) else {}
        chunk: dict[str, Any] = {
            "id": last.get("id"),
            "object": "chat.completion.chunk",
            "created": last.get("created"),
            "model": caller_model,
            "choices": [],
            "usage": to_chat(usage),
        }
        return encode_frame(orjson.dumps(chunk))


RULES = FastPathRules(ModelPlace("model"), carries_stop=carries_stop, usage=UsageChunks())
