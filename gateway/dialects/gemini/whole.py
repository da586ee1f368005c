"""Whole (non-streamed) ``GenerateContentResponse`` ⇄ events / ``Reply``.

Decoding reuses the stream decoder on the one body (a body is one big chunk), so there is a single
place that reads parts, signatures, usage and finish reasons. ``streamGenerateContent`` without
``alt=sse`` answers a JSON *array* of chunks; that is accepted too.
"""

from __future__ import annotations

from typing import Any

from gateway.dialects.base import EncodeContext
from gateway.dialects.common import arguments_object
from gateway.dialects.items import drop_output
from gateway.events import Event, StreamError
from gateway.reply import Reply

from .sigs import to_caller
from .stop_reasons import render_stop_reason
from .stream_decode import DIALECT, GeminiStreamDecoder
from .usage import render_usage


def decode_whole(body: Any) -> list[Event]:
    decoder = GeminiStreamDecoder(whole=True)
    events: list[Event] = []
    chunks = body if isinstance(body, list) else [body]
    for chunk in chunks:
        if isinstance(chunk, dict):
            events.extend(decoder.feed_chunk(chunk))
        else:
            events.append(StreamError("bad_gateway", "gemini: response is not an object", 502))
            return events
        if events and isinstance(events[-1], StreamError):
            return events
    events.extend(decoder.close())
    return events


def shows_thoughts(ctx: EncodeContext) -> bool:
    """Gemini returns thought text only to a caller that set ``thinkingConfig.includeThoughts``
    (signatures travel either way, on the next part). Except from an Anthropic upstream: its
    signature signs the thinking text, which must come back verbatim on the next turn, and a
    Gemini caller only sends back the parts it was given."""
    if ctx.upstream_dialect == "anthropic":
        return True
    th = ctx.request.thinking if ctx.request is not None else None
    return th is not None and th.include_thoughts is True


def encode_whole(reply: Reply, ctx: EncodeContext) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    sig: str | None = None
    thoughts = shows_thoughts(ctx)
    for block in reply.blocks:
        part: dict[str, Any] | None = None
        if block.item is not None and block.origin == DIALECT:  # the upstream's own part, verbatim
            part = dict(block.item)
        elif block.kind == "opaque":
            drop_output(ctx, block.item)  # a server tool's item: no Gemini part
        elif block.kind == "text":
            part = {"text": block.text} if block.text or sig else None
        elif block.kind == "thinking":
            if block.text and thoughts:
                part = {"text": block.text, "thought": True}
        elif block.kind == "tool_call":
            part = {
                "functionCall": {
                    "id": block.id or f"call_{len(parts) + 1}",
                    "name": block.name or "",
                    "args": arguments_object(block.arguments),
                }
            }
        if part is not None and sig is not None:
            part["thoughtSignature"] = sig
            sig = None
        if part is not None:
            parts.append(part)
        if block.kind == "thinking" and block.signature:
            sig = to_caller(ctx.upstream_dialect, block.signature)
    if sig is not None:
        parts.append({"text": "", "thoughtSignature": sig})
    if reply.end is not None:
        reason = render_stop_reason(reply.end, ctx.upstream_dialect == DIALECT)
    else:
        reason = "OTHER" if reply.error is not None else "STOP"
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "finishReason": reason, "index": 0}
    return {
        "candidates": [candidate],
        "usageMetadata": render_usage(reply.usage),
        "modelVersion": ctx.model,
        "responseId": reply.id or "",
    }
