"""Events → a Gemini ``streamGenerateContent?alt=sse`` body for the caller.

One ``data: <GenerateContentResponse>\\r\\n\\r\\n`` frame per delta (CRLF CRLF like the live API),
each carrying only the newest increment. Gemini has no terminator: after ``End`` the encoder
writes a last chunk with ``finishReason`` and complete ``usageMetadata``, and the relay closes the
connection. ``StreamError`` becomes ``data: {"error": {code, message, status}}``, which the
google-genai SDK raises as ``APIError``.

Tool calls are buffered: Gemini clients expect one whole ``functionCall {id, name, args}`` part,
so fragments are joined and sent when the block stops. A thinking signature (packed for the
caller with ``sigs.to_caller``: base64 of the packed form, see sigs.py) rides as ``thoughtSignature`` on the next part emitted,
or on an empty text part of the final chunk, which is where Gemini itself puts it.

``keepalive()`` returns ``b""``: an SSE comment line is not safe for Gemini clients. google-genai
(Python) feeds any non-``data:`` line into its raw-JSON buffer and fails to parse it, and the JS
SDK matches frames with an anchored ``^data: `` regex, so a stray line stalls it.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.dialects.base import EncodeContext
from gateway.dialects.common import arguments_object, log, new_id
from gateway.dialects.items import drop_output
from gateway.events import (
    BlockStart,
    BlockStop,
    End,
    Event,
    MessageStart,
    SignatureDelta,
    StreamError,
    TextDelta,
    ThinkingDelta,
    ToolArgsDelta,
    Usage,
)

from . import stop_reasons
from . import usage as usage_map
from .errors import error_object, status_name
from .sigs import to_caller
from .whole import shows_thoughts

DIALECT = "gemini"

_HEAD = b'data: {"candidates":[{"content":{"parts":['
_MID = b'],"role":"model"},"index":0}]'
_END = b"}\r\n\r\n"


class GeminiStreamEncoder:
    __slots__ = (
        "_ctx",
        "_tail",
        "_usage",
        "_usage_bytes",
        "_sig",
        "_sig_index",
        "_kinds",
        "_calls",
        "_done",
        "_thoughts",
    )

    def __init__(self, ctx: EncodeContext) -> None:
        self._ctx = ctx
        self._tail = b""
        self._usage: Usage | None = None
        self._usage_bytes = b""
        self._sig: str | None = None  # raw upstream signature waiting for the next part
        self._sig_index = -1
        self._kinds: dict[int, str] = {}
        self._calls: dict[int, list[Any]] = {}  # index -> [id, name, fragments]
        self._done = False
        self._thoughts = shows_thoughts(ctx)  # thought text only for includeThoughts: true
        self._set_id(new_id("gw-"))

    def _set_id(self, rid: str) -> None:
        self._tail = b',"modelVersion":' + orjson.dumps(self._ctx.model) + b',"responseId":' + orjson.dumps(rid) + _END

    def keepalive(self) -> bytes:
        return b""

    def _chunk(self, part: dict[str, Any]) -> bytes:
        if self._sig is not None:
            part["thoughtSignature"] = to_caller(self._ctx.upstream_dialect, self._sig)
            self._sig = None
        return _HEAD + orjson.dumps(part) + _MID + self._usage_bytes + self._tail

    def encode(self, event: Event) -> bytes:
        if self._done:
            return b""
        if isinstance(event, TextDelta):
            return self._chunk({"text": event.text}) if event.text else b""
        if isinstance(event, ThinkingDelta):
            return self._chunk({"text": event.text, "thought": True}) if event.text and self._thoughts else b""
        if isinstance(event, ToolArgsDelta):
            call = self._calls.get(event.index)
            if call is not None:
                call[2].append(event.fragment)
            return b""
        if isinstance(event, BlockStart):
            self._kinds[event.index] = event.kind
            if event.item is not None and event.origin == DIALECT:  # the upstream's own part, verbatim
                return self._chunk(dict(event.item))
            if event.kind == "opaque":
                drop_output(self._ctx, event.item)  # a server tool's item: no Gemini part
            elif event.kind == "tool_call":
                self._calls[event.index] = [event.id or f"call_{len(self._calls) + 1}", event.name or "", []]
            return b""
        if isinstance(event, BlockStop):
            call = self._calls.pop(event.index, None)
            if call is None:
                return b""
            fc = {"id": call[0], "name": call[1], "args": arguments_object("".join(call[2]))}
            return self._chunk({"functionCall": fc})
        if isinstance(event, SignatureDelta):
            out = b""
            if self._sig is not None and self._sig_index != event.index:
                out = self._chunk({"text": ""})  # flush the previous block's signature
            if self._sig is not None and self._sig_index == event.index:
                self._sig += event.signature
            else:
                self._sig = event.signature
            self._sig_index = event.index
            return out
        if isinstance(event, Usage):
            self._usage = event
            self._usage_bytes = b',"usageMetadata":' + orjson.dumps(usage_map.render_usage(event))
            return b""
        if isinstance(event, MessageStart):
            if event.id:
                self._set_id(event.id)
            return b""
        if isinstance(event, End):
            return self._end(event)
        if isinstance(event, StreamError):
            self._done = True
            same = self._ctx.upstream_dialect == "gemini"
            code = 503 if event.status == 529 else event.status  # 529 is Anthropic's own
            body = error_object(code, event.message, status_name(event.kind, event.raw, same))
            return b"data: " + orjson.dumps(body) + b"\r\n\r\n"
        return b""

    def _end(self, event: End) -> bytes:
        self._done = True
        if self._calls:
            log.warning("gemini encoder: %d unfinished tool call(s) dropped at end of stream", len(self._calls))
            self._calls.clear()
        reason = stop_reasons.render_stop_reason(event, self._ctx.upstream_dialect == "gemini")
        part: dict[str, Any] = {"text": ""}
        if self._sig is not None:
            part["thoughtSignature"] = to_caller(self._ctx.upstream_dialect, self._sig)
            self._sig = None
        cand = b'"finishReason":' + orjson.dumps(reason)
        usage_bytes = b',"usageMetadata":' + orjson.dumps(usage_map.render_usage(self._usage or Usage()))
        return _HEAD + orjson.dumps(part) + b'],"role":"model"},' + cand + b',"index":0}]' + usage_bytes + self._tail
