"""Whole ``chat.completion`` objects ⇄ events / ``Reply``.

``decode_whole`` turns an upstream JSON reply (an upstream that ignored ``stream``) into the same
events a stream would give, via ``reply.unfold`` so ``reply.fold`` stays the only accumulator.
``encode_whole`` renders a folded ``Reply`` for a non-streaming Chat caller; thinking text goes in
``message.reasoning_content`` and signatures ride on tool call ids exactly as in a stream.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from gateway.dialects.base import EncodeContext
from gateway.dialects.common import new_id, warn_unknown
from gateway.dialects.items import drop_output
from gateway.events import End, Event, MessageStart, Usage
from gateway.reply import Reply, ReplyBlock, unfold

from .content_parts import content_parts
from .errors import stream_error
from .stop_reasons import map_stop_reason, refusal_notice, render_stop_reason
from .stream_encode import DIALECT, packed_signature
from .usage import convert_usage, render_usage


def decode_whole(body: dict[str, Any]) -> list[Event]:
    if body.get("error"):
        return [
            MessageStart(body.get("id") or new_id("chatcmpl-"), body.get("model") or ""),
            stream_error(body["error"]),
        ]
    reply = Reply(id=body.get("id") or new_id("chatcmpl-"), model=body.get("model") or "")
    choices = body.get("choices") or []
    choice = next((c for c in choices if isinstance(c, dict) and c.get("index", 0) == 0), None)
    if len(choices) > 1:
        warn_unknown(DIALECT, "choice index > 0 (n > 1 is not supported; only choice 0 is relayed)")
    refusal = False
    finish = None
    if choice is not None:
        message = choice.get("message") or {}
        finish = choice.get("finish_reason")
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            reply.blocks.append(ReplyBlock("thinking", reasoning))
        # a string, or parts (Mistral's reasoning models: thinking and text chunks, in order)
        for kind, text in content_parts(message.get("content")):
            if reply.blocks and reply.blocks[-1].kind == kind:
                reply.blocks[-1].text += text
            else:
                reply.blocks.append(ReplyBlock(kind, text))
        if isinstance(message.get("refusal"), str) and message["refusal"]:
            refusal = True
            reply.blocks.append(ReplyBlock("text", message["refusal"]))
        for call in message.get("tool_calls") or []:
            if not isinstance(call, dict):
                continue
            function = call.get("function") or {}
            arguments = function.get("arguments")
            if isinstance(arguments, dict):
                arguments = orjson.dumps(arguments).decode()
            reply.blocks.append(
                ReplyBlock(
                    "tool_call",
                    arguments if isinstance(arguments, str) else "",
                    id=call.get("id") or new_id("call_"),
                    name=function.get("name") or "",
                )
            )
    reply.usage = convert_usage(body.get("usage")) or Usage()
    reply.end = End(map_stop_reason(finish, refusal=refusal), finish)
    return unfold(reply)


def encode_whole(reply: Reply, ctx: EncodeContext) -> dict[str, Any]:
    same = ctx.upstream_dialect == DIALECT
    texts: list[str] = []
    thinking: list[str] = []
    tool_calls: list[dict[str, Any]] = []
    pending = ""  # a signature waiting for the next tool call
    for block in reply.blocks:
        if block.kind == "text":
            texts.append(block.text)
        elif block.kind == "thinking":
            thinking.append(block.text)
            if block.signature:
                pending = block.signature  # the latest thinking block's signature wins
        elif block.kind == "redacted_thinking":
            continue
        elif block.kind == "opaque":
            drop_output(ctx, block.item)  # a server tool's item: no Chat form
        elif block.kind == "tool_call":
            call_id = block.id or new_id("call_")
            signature = block.signature or pending
            if signature:
                call_id = f"{call_id}~{packed_signature(ctx.upstream_dialect, signature)}"
                if not block.signature:
                    pending = ""
            tool_calls.append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": block.name or "", "arguments": block.arguments},
                }
            )
        elif block.signature:
            pending = block.signature
    message: dict[str, Any] = {
        "role": "assistant",
        "content": "".join(texts) if texts else None,
        "refusal": refusal_notice(reply.end, same),
        "annotations": [],
    }
    if tool_calls:
        message["tool_calls"] = tool_calls
    if thinking:
        message["reasoning_content"] = "".join(thinking)
    finish = render_stop_reason(reply.end, same) if reply.end is not None else "stop"
    return {
        "id": reply.id if same and reply.id else new_id("chatcmpl-"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": ctx.model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": render_usage(reply.usage),
        "system_fingerprint": None,
    }
