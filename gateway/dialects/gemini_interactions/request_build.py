"""``ChatRequest`` -> a streamed, stateless ``POST /v1beta/interactions`` call.

* The gateway keeps its own state, so the upstream gets ``store: false`` and the whole history as
  ``input`` in the steps form (``user_input`` / ``model_output`` / ``thought`` / ``function_call`` /
  ``function_result``); ``previous_interaction_id`` / ``background`` / ``continuation_token`` from a
  same-dialect caller are never forwarded (the stateful layer resolved them already).
* A ``thought`` step is sent only for a signature this dialect made (``origin``); thought text
  alone is never sent back (the service cannot verify it).
* ``system_instruction`` is one string: ``req.system`` and in-history system turns, joined.
* ``response_format`` uses the polymorphic May-2026 form ``{type: text, mime_type, schema}``
  (``response_mime_type`` was removed by that change).
"""

from __future__ import annotations

import base64
import mimetypes
from typing import Any

from gateway.dialects.base import BuildOptions, UpstreamCall
from gateway.dialects.common import arguments_object
from gateway.dialects.thinking import level_of
from gateway.ir import (
    ChatRequest,
    FilePart,
    ImagePart,
    Message,
    OpaquePart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)

DIALECT = "gemini-interactions"

# extras never forwarded: the stateful layer handles them, or build_request sets them itself.
_NOT_FORWARDED = frozenset(
    {"previous_interaction_id", "background", "continuation_token", "store", "stream", "generation_config", "tools"}
)


def build_request(req: ChatRequest, upstream_model: str, options: BuildOptions) -> UpstreamCall:
    body: dict[str, Any] = {"model": upstream_model}
    system_texts = [p.text for p in req.system if p.text]
    steps: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for message in req.messages:
        if message.role == "system":
            system_texts.extend(p.text for p in message.content if isinstance(p, TextPart) and p.text)
            continue
        steps.extend(_steps(message, names))
    body["input"] = steps
    if system_texts:
        body["system_instruction"] = "\n\n".join(system_texts)

    extras = req.extras.get(DIALECT) or {}
    tools: list[dict[str, Any]] = []
    for tool in req.tools:
        t: dict[str, Any] = {"type": "function", "name": tool.name}
        if tool.description:
            t["description"] = tool.description
        t["parameters"] = tool.parameters
        tools.append(t)
    tools.extend(t for t in extras.get("tools") or [] if isinstance(t, dict))
    if tools:
        body["tools"] = tools

    gen = _generation_config(req)
    for k, v in (extras.get("generation_config") or {}).items():
        gen.setdefault(k, v)
    if gen:
        body["generation_config"] = gen

    rf = req.response_format
    if rf and rf.get("type") in ("json_schema", "json", "json_object"):
        fmt: dict[str, Any] = {"type": "text", "mime_type": "application/json"}
        if isinstance(rf.get("schema"), dict):
            fmt["schema"] = rf["schema"]
        body["response_format"] = fmt

    for key, value in extras.items():
        if key not in _NOT_FORWARDED and key not in body:
            body[key] = value
    body["stream"] = options.stream
    # Stored upstream unless the caller said store: false: a dropped upstream stream can then be
    # resumed with last_event_id (InteractionsCodec.resume_call) instead of being generated twice.
    body["store"] = req.store is not False
    return UpstreamCall(path="/v1beta/interactions", body=body)


def _generation_config(req: ChatRequest) -> dict[str, Any]:
    gen: dict[str, Any] = {}
    if req.max_tokens is not None:
        gen["max_output_tokens"] = req.max_tokens
    if req.temperature is not None:
        gen["temperature"] = req.temperature
    if req.top_p is not None:
        gen["top_p"] = req.top_p
    if req.stop:
        gen["stop_sequences"] = list(req.stop)
    th = req.thinking
    if th is not None:
        level = level_of(th)
        if level is None and th.enabled is False:
            level = "minimal"  # Gemini 3 cannot switch thinking off; minimal is the floor
        if level is not None:
            gen["thinking_level"] = level
        if th.include_thoughts is not None:
            gen["thinking_summaries"] = "auto" if th.include_thoughts else "none"
    tc = req.tool_choice
    if tc is not None:
        if tc.mode == "tool" and tc.name:
            gen["tool_choice"] = {"allowed_tools": {"mode": "any", "tools": [tc.name]}}
        elif tc.allowed:
            gen["tool_choice"] = {
                "allowed_tools": {"mode": "any" if tc.mode == "required" else "auto", "tools": list(tc.allowed)}
            }
        else:
            gen["tool_choice"] = {"auto": "auto", "none": "none", "required": "any"}.get(tc.mode, "auto")
    return gen


def _steps(message: Message, names: dict[str, str]) -> list[dict[str, Any]]:
    """Steps of one message; consecutive content parts share one user_input / model_output step."""
    steps: list[dict[str, Any]] = []
    holder = "model_output" if message.role == "assistant" else "user_input"
    content: list[dict[str, Any]] | None = None
    for part in message.content:
        block: dict[str, Any] | None = None
        if isinstance(part, TextPart):
            block = {"type": "text", "text": part.text} if part.text else None
        elif isinstance(part, (ImagePart, FilePart)):
            block = content_block(part)
        if block is not None:
            if content is None:
                content = []
                steps.append({"type": holder, "content": content})
            content.append(block)
            continue
        if isinstance(part, (TextPart, ImagePart, FilePart)):
            continue
        content = None
        if isinstance(part, ThinkingPart):
            if part.origin == DIALECT and part.signature:
                steps.append({"type": "thought", "signature": part.signature})
        elif isinstance(part, ToolCallPart):
            names[part.id] = part.name
            steps.append(
                {
                    "type": "function_call",
                    "id": part.id,
                    "name": part.name,
                    "arguments": arguments_object(part.arguments),
                }
            )
        elif isinstance(part, ToolResultPart):
            steps.append(_function_result(part, names))
        elif isinstance(part, OpaquePart) and part.origin == DIALECT:  # a server tool's step, verbatim
            steps.append(part.item)
    return steps


def _function_result(part: ToolResultPart, names: dict[str, str]) -> dict[str, Any]:
    step: dict[str, Any] = {"type": "function_result", "call_id": part.tool_call_id}
    name = part.name or names.get(part.tool_call_id)
    if name:
        step["name"] = name
    texts = [c.text for c in part.content if isinstance(c, TextPart)]
    if len(texts) == len(part.content):  # text only: the result is a string
        step["result"] = "".join(texts)
    else:
        blocks = [
            {"type": "text", "text": c.text} if isinstance(c, TextPart) else content_block(c) for c in part.content
        ]
        step["result"] = [b for b in blocks if b]
    if part.is_error:
        step["is_error"] = True
    return step


def _media_type(kind: str, mime: str | None) -> str:
    if kind == "image" or (mime or "").startswith("image/"):
        return "image"
    if (mime or "").startswith("audio/"):
        return "audio"
    if (mime or "").startswith("video/"):
        return "video"
    return "document"


def content_block(part: ImagePart | FilePart) -> dict[str, Any] | None:
    """An image / file part as an Interactions content block (data URLs are split into data + mime)."""
    kind = "image" if isinstance(part, ImagePart) else "file"
    mime, data, uri = part.media_type, part.data, part.url
    if not data and uri and uri.startswith("data:"):
        head, _, payload = uri.partition(",")
        mime = mime or head[5:].split(";")[0] or None
        data = payload if ";base64" in head else base64.b64encode(payload.encode()).decode()
        uri = None
    if not data and not uri:
        return None
    if mime is None and uri:
        mime = mimetypes.guess_type(uri)[0]
    block: dict[str, Any] = {"type": _media_type(kind, mime)}
    if data:
        block["data"] = data
    else:
        block["uri"] = uri
    if mime:
        block["mime_type"] = mime
    return block
