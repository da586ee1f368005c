"""Whole Anthropic ``message`` objects ⇄ events / ``Reply``.

``decode_whole`` turns an upstream's JSON reply (sent despite ``stream: true``) into the same
events the stream decoder would produce, so ``reply.fold`` stays the only accumulator.
``encode_whole`` renders a folded ``Reply`` as the ``message`` object the SDK parses:
``{id, type, role, model, content, stop_reason, stop_sequence, usage}``; ``tool_use.input`` is an
object (the arguments JSON text parsed; empty → ``{}``).
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.dialects.base import EncodeContext
from gateway.dialects.common import arguments_object, new_id
from gateway.dialects.items import drop_output
from gateway.dialects.signatures import for_caller
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
    Usage,
)
from gateway.reply import Reply

from .errors import stream_error
from .stop_reasons import map_stop_reason, render_stop_reason
from .usage import convert_usage, render_usage

DIALECT = "anthropic"


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def decode_whole(body: dict[str, Any]) -> list[Event]:
    if body.get("type") == "error":
        return [MessageStart(new_id("msg_"), ""), stream_error(body)]
    events: list[Event] = [MessageStart(_str(body.get("id")) or new_id("msg_"), _str(body.get("model")) or "")]
    index = 0
    content = body.get("content")
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        btype = block.get("type")
        if btype == "text":
            # with its citations (web search, documents): the block kept, its text the deltas'
            cited = block if block.get("citations") else None
            events.append(BlockStart(index, "text", item=cited, origin=DIALECT if cited else None))
            text = _str(block.get("text"))
            if text:
                events.append(TextDelta(index, text))
        elif btype == "tool_use":
            events.append(
                BlockStart(index, "tool_call", _str(block.get("id")) or new_id("toolu_"), _str(block.get("name")) or "")
            )
            tool_input = block.get("input")
            events.append(
                ToolArgsDelta(index, orjson.dumps(tool_input if isinstance(tool_input, dict) else {}).decode())
            )
        elif btype == "thinking":
            events.append(BlockStart(index, "thinking"))
            text = _str(block.get("thinking"))
            if text:
                events.append(ThinkingDelta(index, text))
            signature = _str(block.get("signature"))
            if signature:
                events.append(SignatureDelta(index, signature))
        elif btype == "redacted_thinking":
            events.append(BlockStart(index, "redacted_thinking", data=_str(block.get("data")) or ""))
        else:  # a server tool's block (server_tool_use, web_search_tool_result …): kept whole
            events.append(BlockStart(index, "opaque", item=block, origin=DIALECT))
        events.append(BlockStop(index))
        index += 1
    events.append(convert_usage(body.get("usage")) or Usage())
    reason = _str(body.get("stop_reason"))
    events.append(End(map_stop_reason(reason), reason, _str(body.get("stop_sequence"))))
    return events


def encode_whole(reply: Reply, ctx: EncodeContext) -> dict[str, Any]:
    same = ctx.upstream_dialect == DIALECT
    content: list[dict[str, Any]] = []
    for block in reply.blocks:
        if block.item is not None and block.origin == DIALECT:  # the upstream's own block, verbatim
            item = block.item
            if block.kind == "text":  # a cited text: the text as the events say (guardrails …)
                item = {**item, "text": block.text}
            elif block.text:  # its input, streamed (input_json_delta)
                item = {**item, "input": arguments_object(block.text)}
            content.append(item)
        elif block.kind == "opaque":
            drop_output(ctx, block.item)
        elif block.kind == "text":
            content.append({"type": "text", "text": block.text})
        elif block.kind == "tool_call":
            content.append(
                {
                    "type": "tool_use",
                    "id": block.id or new_id("toolu_"),
                    "name": block.name or "",
                    "input": arguments_object(block.text),
                }
            )
        elif block.kind == "thinking":
            signature = for_caller(DIALECT, ctx.upstream_dialect, block.signature) if block.signature else ""
            content.append({"type": "thinking", "thinking": block.text, "signature": signature})
        elif block.kind == "redacted_thinking":
            # packed with its origin like a signature: it is only valid where it was made
            content.append(
                {"type": "redacted_thinking", "data": for_caller(DIALECT, ctx.upstream_dialect, block.data or "")}
            )
    end = reply.end or End("stop")
    return {
        "id": reply.id if same and reply.id else new_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": ctx.model,
        "content": content,
        "stop_reason": render_stop_reason(end, same),
        "stop_sequence": end.stop_sequence,
        "usage": render_usage(reply.usage),
    }
