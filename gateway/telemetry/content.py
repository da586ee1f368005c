"""Prompts and completions on spans, in the GenAI conventions' own JSON form (``capture_content``).

Only used when ``[telemetry] capture_content = true``. The conventions define ``gen_ai.input.messages``,
``gen_ai.system_instructions``, ``gen_ai.tool.definitions`` and ``gen_ai.output.messages`` as
structured values; the Python SDK's attributes hold only primitives, so they are recorded as JSON
strings, which the conventions allow on spans. Built from the IR (``ChatRequest``) and the folded
``Reply``, so every caller and upstream dialect reads the same.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.ir import ChatRequest, FilePart, ImagePart, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from gateway.reply import Reply

# normalised stop reason -> the conventions' finish_reason values
FINISH = {
    "stop": "stop",
    "length": "length",
    "tool_use": "tool_call",
    "content_filter": "content_filter",
    "refusal": "content_filter",
    "error": "error",
}


def _arguments(text: str) -> Any:
    try:
        return orjson.loads(text or "{}")
    except orjson.JSONDecodeError:
        return text  # cut-off arguments stay as the text that arrived


def _modality(media_type: str | None) -> str:
    head = (media_type or "").split("/", 1)[0]
    return head if head in ("image", "video", "audio") else "file"


def _part(part: Any) -> dict[str, Any] | None:
    if isinstance(part, TextPart):
        return {"type": "text", "content": part.text}
    if isinstance(part, ToolCallPart):
        return {"type": "tool_call", "id": part.id, "name": part.name, "arguments": _arguments(part.arguments)}
    if isinstance(part, ToolResultPart):
        text = "".join(p.text for p in part.content if isinstance(p, TextPart))
        return {"type": "tool_call_response", "id": part.tool_call_id, "response": text}
    if isinstance(part, ThinkingPart):
        return {"type": "reasoning", "content": part.text} if part.text else None
    if isinstance(part, (ImagePart, FilePart)):
        modality = "image" if isinstance(part, ImagePart) else _modality(part.media_type)
        if part.data is not None:
            return {"type": "blob", "modality": modality, "mime_type": part.media_type, "content": part.data}
        return {"type": "uri", "modality": modality, "mime_type": part.media_type, "uri": part.url}
    return None


def request_content(req: ChatRequest) -> dict[str, str]:
    """The request's opt-in content attributes, as JSON strings (computed once per request)."""
    messages = []
    for message in req.messages:
        parts = [p for p in (_part(part) for part in message.content) if p is not None]
        role = "tool" if parts and all(p["type"] == "tool_call_response" for p in parts) else message.role
        messages.append({"role": role, "parts": parts})
    attrs = {"gen_ai.input.messages": orjson.dumps(messages).decode()}
    if req.system:
        attrs["gen_ai.system_instructions"] = orjson.dumps(
            [{"type": "text", "content": p.text} for p in req.system]
        ).decode()
    if req.tools:
        tools = [
            {"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters}
            for t in req.tools
        ]
        attrs["gen_ai.tool.definitions"] = orjson.dumps(tools).decode()
    return attrs


def output_content(reply: Reply) -> dict[str, str]:
    """``gen_ai.output.messages`` of a folded answer (one message: the gateway asks for one choice)."""
    parts: list[dict[str, Any]] = []
    for block in reply.blocks:
        if block.kind == "text":
            parts.append({"type": "text", "content": block.text})
        elif block.kind == "tool_call":
            parts.append(
                {"type": "tool_call", "id": block.id, "name": block.name, "arguments": _arguments(block.arguments)}
            )
        elif block.kind == "thinking" and block.text:
            parts.append({"type": "reasoning", "content": block.text})
    end = reply.end
    finish = FINISH.get(end.reason, end.raw_reason or end.reason) if end is not None else "error"
    return {
        "gen_ai.output.messages": orjson.dumps(
            [{"role": "assistant", "parts": parts, "finish_reason": finish}]
        ).decode()
    }
