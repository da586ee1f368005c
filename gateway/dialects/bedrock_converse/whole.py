"""A whole Converse reply → events (``reply.fold`` stays the only accumulator).

``{output: {message: {role, content: [...]}}, stopReason, usage, metrics,
additionalModelResponseFields}``; content blocks are the one-key unions of the request
(content.py): ``text``, ``toolUse`` (``input`` an object), ``reasoningContent`` (``reasoningText``
{text, signature} or ``redactedContent``). Blocks the IR cannot carry (citations, images …) are
skipped and the rest numbered 0..n-1. No caller speaks Converse: there is no ``encode_whole``.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.dialects.common import new_id, warn_unknown
from gateway.events import (
    BlockStart,
    BlockStop,
    End,
    Event,
    MessageStart,
    SignatureDelta,
    TextDelta,
    ThinkingDelta,
    ToolArgsDelta,
)

from .stop_reasons import map_stop_reason
from .stream_decode import DIALECT, stop_sequence_of
from .usage import convert_usage


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _block(block: dict[str, Any], index: int) -> list[Event] | None:
    text = _str(block.get("text"))
    if text is not None:
        return [BlockStart(index, "text"), TextDelta(index, text)] if text else [BlockStart(index, "text")]
    tool = block.get("toolUse")
    if isinstance(tool, dict):
        tool_input = tool.get("input")
        return [
            BlockStart(
                index, "tool_call", _str(tool.get("toolUseId")) or new_id("tooluse_"), _str(tool.get("name")) or ""
            ),
            ToolArgsDelta(index, orjson.dumps(tool_input if isinstance(tool_input, dict) else {}).decode()),
        ]
    reasoning = block.get("reasoningContent")
    if isinstance(reasoning, dict):
        redacted = _str(reasoning.get("redactedContent"))
        if redacted is not None:
            return [BlockStart(index, "redacted_thinking", data=redacted)]
        body = reasoning.get("reasoningText")
        body = body if isinstance(body, dict) else {}
        events: list[Event] = [BlockStart(index, "thinking")]
        thought = _str(body.get("text"))
        if thought:
            events.append(ThinkingDelta(index, thought))
        signature = _str(body.get("signature"))
        if signature:
            events.append(SignatureDelta(index, signature))
        return events
    warn_unknown(DIALECT, f"content block {sorted(block)!r}")
    return None


def decode_whole(body: dict[str, Any]) -> list[Event]:
    events: list[Event] = [MessageStart(new_id("msg_"), "")]
    output = body.get("output")
    message = output.get("message") if isinstance(output, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    index = 0
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        decoded = _block(block, index)
        if decoded is None:
            continue
        events += decoded
        events.append(BlockStop(index))
        index += 1
    usage = convert_usage(body.get("usage"))
    if usage is not None:
        events.append(usage)
    reason = _str(body.get("stopReason"))
    events.append(End(map_stop_reason(reason), reason, stop_sequence_of(body.get("additionalModelResponseFields"))))
    return events
