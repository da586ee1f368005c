"""Conversation history as stored JSON, for ``previous_response_id`` / ``previous_interaction_id``.

A stored turn keeps the whole conversation so far in the IR's own terms (not in one dialect's
wire format), so a follow-up can be sent to an upstream of any dialect, and thinking parts keep
their signatures and origin. ``reply_message`` turns a folded upstream reply into the assistant
turn that continues the history.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from gateway.dialects.openai_responses.request_parse import NS_SEP
from gateway.ir import (
    FilePart,
    ImagePart,
    Message,
    OpaquePart,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from gateway.reply import Reply

_KINDS: dict[type, str] = {
    TextPart: "text",
    ImagePart: "image",
    FilePart: "file",
    ToolCallPart: "tool_call",
    ToolResultPart: "tool_result",
    ThinkingPart: "thinking",
    OpaquePart: "opaque",
}


def _part_json(part: Part) -> dict[str, Any]:
    data = asdict(part)
    data["kind"] = _KINDS[type(part)]
    return data


def _simple(data: dict[str, Any]) -> TextPart | ImagePart | FilePart:
    kind = data.pop("kind", "text")
    if kind == "image":
        return ImagePart(**data)
    if kind == "file":
        return FilePart(**data)
    return TextPart(**data)


def _part(data: dict[str, Any]) -> Part:
    data = dict(data)
    kind = data.pop("kind")
    if kind == "tool_call":
        return ToolCallPart(**data)
    if kind == "tool_result":
        content = [_simple(dict(c)) for c in data.pop("content", [])]
        return ToolResultPart(content=content, **data)
    if kind == "thinking":
        return ThinkingPart(**data)
    if kind == "opaque":
        return OpaquePart(**data)
    data["kind"] = kind
    return _simple(data)


def messages_to_json(messages: list[Message]) -> list[dict[str, Any]]:
    out = []
    for message in messages:
        parts = []
        for part in message.content:
            item = _part_json(part)
            if isinstance(part, ToolResultPart):
                item["content"] = [_part_json(c) for c in part.content]
            parts.append(item)
        out.append({"role": message.role, "content": parts})
    return out


def messages_from_json(data: list[dict[str, Any]]) -> list[Message]:
    return [Message(role=m["role"], content=[_part(p) for p in m["content"]]) for m in data]


def reply_message(reply: Reply, origin: str) -> Message:
    """The assistant turn an upstream reply adds to the conversation."""
    content: list[Part] = []
    for block in reply.blocks:
        if block.kind == "text" and block.text:
            content.append(TextPart(block.text))
        elif block.kind == "tool_call":
            # the IR spells a namespaced tool as Responses' request parser flattens it, so the
            # next turn's builder restores the namespace
            name = f"{block.namespace}{NS_SEP}{block.name or ''}" if block.namespace else block.name or ""
            content.append(ToolCallPart(block.id or "", name, block.arguments, block.item, block.origin))
        elif block.kind == "opaque" and block.item is not None and block.origin:
            content.append(OpaquePart(block.item, block.origin))  # a server tool's item, for its own dialect
        elif block.kind == "thinking":
            content.append(ThinkingPart(block.text, block.signature, origin if block.signature else None))
        elif block.kind == "redacted_thinking":
            content.append(ThinkingPart("", None, origin, redacted_data=block.data))
    return Message("assistant", content)
