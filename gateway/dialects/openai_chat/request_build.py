"""``ChatRequest`` → ``POST /chat/completions`` (the provider's base_url already ends in ``/v1``).

Always streamed with ``stream_options.include_usage`` so usage arrives. Limits use
``max_completion_tokens`` (``max_tokens`` is deprecated and rejected by reasoning models).
Thinking parts are dropped: Chat takes no reasoning input and no signatures. Tool results become
one ``tool`` message each, placed before any other content of the same user turn (Chat wants them
right after the assistant's ``tool_calls``); a tool message holds text only, so a result's images
and files follow in the user message after them. ``metadata`` is only sent with ``store``, which
OpenAI requires (otherwise it is dropped and reported, ``fields.py``).
"""

from __future__ import annotations

from typing import Any

from gateway.dialects.base import BuildOptions, UpstreamCall
from gateway.dialects.common import log, openai_user
from gateway.dialects.thinking import level_of
from gateway.ir import ChatRequest, FilePart, ImagePart, Message, TextPart, ToolCallPart, ToolResultPart

DIALECT = "openai-chat"
AUDIO_FORMATS = {"audio/mpeg": "mp3", "audio/mp3": "mp3", "audio/wav": "wav", "audio/x-wav": "wav"}


def _data_url(media_type: str | None, data: str) -> str:
    return f"data:{media_type or 'application/octet-stream'};base64,{data}"


def _content_part(part: TextPart | ImagePart | FilePart) -> dict[str, Any] | None:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ImagePart):
        url = part.url if part.url else _data_url(part.media_type, part.data or "")
        return {"type": "image_url", "image_url": {"url": url}}
    if isinstance(part, FilePart):
        if part.data is not None and part.media_type in AUDIO_FORMATS:
            return {"type": "input_audio", "input_audio": {"data": part.data, "format": AUDIO_FORMATS[part.media_type]}}
        if part.data is not None:
            file: dict[str, Any] = {"file_data": _data_url(part.media_type, part.data)}
        elif part.url and not part.url.startswith(("http://", "https://", "gs://")):
            file = {"file_id": part.url}
        else:
            log.warning("openai-chat: a file given by URL cannot be sent to Chat Completions; dropped")
            return None
        if part.filename:
            file["filename"] = part.filename
        return {"type": "file", "file": file}
    return None


def _user(msg: Message, out: list[dict[str, Any]]) -> None:
    rest: list[dict[str, Any]] = []
    for part in msg.content:
        if isinstance(part, ToolResultPart):
            texts = [p.text for p in part.content if isinstance(p, TextPart)]
            out.append({"role": "tool", "tool_call_id": part.tool_call_id, "content": "".join(texts)})
            # A tool message holds text only: its images and files follow in the user message
            # after the tool messages (the model sees them right after the result they belong to).
            media = [
                m for p in part.content if isinstance(p, (ImagePart, FilePart)) and (m := _content_part(p)) is not None
            ]
            if media:
                rest.append({"type": "text", "text": f"(attached to the result of tool call {part.tool_call_id})"})
                rest.extend(media)
        elif isinstance(part, (TextPart, ImagePart, FilePart)):
            encoded = _content_part(part)
            if encoded is not None:
                rest.append(encoded)
    if not rest:
        return
    if len(rest) == 1 and rest[0]["type"] == "text":
        out.append({"role": "user", "content": rest[0]["text"]})
    else:
        out.append({"role": "user", "content": rest})


def _assistant(msg: Message, out: list[dict[str, Any]]) -> None:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for part in msg.content:
        if isinstance(part, TextPart):
            texts.append(part.text)
        elif isinstance(part, ToolCallPart):
            calls.append(
                {
                    "id": part.id,
                    "type": "function",
                    "function": {"name": part.name, "arguments": part.arguments or "{}"},
                }
            )
        # ThinkingPart: Chat takes no reasoning input; images from the assistant are not expressible
    entry: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else (None if calls else "")}
    if calls:
        entry["tool_calls"] = calls
    out.append(entry)


def _messages(req: ChatRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if req.system:
        out.append({"role": "system", "content": "\n\n".join(p.text for p in req.system)})
    for msg in req.messages:
        if msg.role == "system":
            out.append(
                {"role": "system", "content": "\n\n".join(p.text for p in msg.content if isinstance(p, TextPart))}
            )
        elif msg.role == "assistant":
            _assistant(msg, out)
        else:
            _user(msg, out)
    return out


def _tool_choice(req: ChatRequest) -> Any:
    choice = req.tool_choice
    if choice is None:
        return None
    if choice.allowed:
        mode = "required" if choice.mode == "required" else "auto"
        tools = [{"type": "function", "function": {"name": n}} for n in choice.allowed]
        return {"type": "allowed_tools", "allowed_tools": {"mode": mode, "tools": tools}}
    if choice.mode == "tool":
        return {"type": "function", "function": {"name": choice.name}}
    return choice.mode


def _response_format(rf: dict[str, Any] | None) -> dict[str, Any] | None:
    if rf is None:
        return None
    if rf.get("type") == "json_schema":
        schema: dict[str, Any] = {"name": rf.get("name") or "response", "schema": rf.get("schema") or {}}
        if rf.get("strict") is not None:
            schema["strict"] = rf["strict"]
        if rf.get("description"):
            schema["description"] = rf["description"]
        return {"type": "json_schema", "json_schema": schema}
    return {"type": "json_object"}


def build_request(req: ChatRequest, upstream_model: str, options: BuildOptions) -> UpstreamCall:
    body: dict[str, Any] = {"model": upstream_model, "messages": _messages(req)}
    if req.tools:
        tools = []
        for tool in req.tools:
            fn: dict[str, Any] = {"name": tool.name, "parameters": tool.parameters}
            if tool.description is not None:
                fn["description"] = tool.description
            if tool.strict is not None:
                fn["strict"] = tool.strict
            tools.append({"type": "function", "function": fn})
        body["tools"] = tools
        if req.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = req.parallel_tool_calls
        choice = _tool_choice(req)
        if choice is not None:
            body["tool_choice"] = choice
    if req.max_tokens is not None:
        body["max_completion_tokens"] = req.max_tokens
    if req.temperature is not None:
        body["temperature"] = req.temperature
    if req.top_p is not None:
        body["top_p"] = req.top_p
    if req.stop:
        body["stop"] = req.stop
    if req.user is not None:
        body["user"] = openai_user(req.user)
    if req.store is not None:
        body["store"] = req.store
    if req.metadata and req.store:
        body["metadata"] = req.metadata
    effort = level_of(req.thinking)
    if effort is not None:
        body["reasoning_effort"] = effort
    response_format = _response_format(req.response_format)
    if response_format is not None:
        body["response_format"] = response_format
    if req.prompt_cache_key is not None:  # from any OpenAI caller (Chat or Responses: the same field)
        body["prompt_cache_key"] = req.prompt_cache_key
    for key, value in req.extras.get(DIALECT, {}).items():
        body.setdefault(key, value)
    if options.stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    else:
        body.pop("stream_options", None)
    return UpstreamCall(path="/chat/completions", body=body)
