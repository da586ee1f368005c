"""Anthropic Messages request JSON → ``ChatRequest``.

Accepted beyond the strict API, because real callers send it:

* ``max_tokens`` may be missing here (the builder fills in the provider default). Callers of
  ``POST /v1/messages`` never get that far without it: ``validate.py`` refuses it first, as Anthropic does;
* ``role: "system"`` turns inside ``messages`` (Claude Code sends them) become
  ``Message(role="system")`` at that position, never a 400.

Fields the IR has no slot for (``context_management``, ``output_config``, ``service_tier``,
``container``, ``mcp_servers`` …) are kept in ``req.extras["anthropic"]`` so an Anthropic upstream
receives them unchanged. When a tool carries keys the IR cannot hold (``cache_control``,
``defer_loading``, server tools such as ``web_search_20250305``), the caller's original tool list is
kept as ``extras["anthropic"]["tools"]`` and the Anthropic builder sends that list verbatim.
Likewise a ``thinking`` object the IR cannot express exactly (``adaptive``, ``display``) is kept
as ``extras["anthropic"]["thinking"]``.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.dialects.base import RequestMeta
from gateway.dialects.common import (
    expect_dict,
    get_bool,
    get_dict,
    get_float,
    get_int,
    get_list,
    get_str,
    warn_unknown,
)
from gateway.dialects.signatures import unpack
from gateway.errors import invalid
from gateway.ir import (
    ROLES,
    ChatRequest,
    FilePart,
    ImagePart,
    Message,
    OpaquePart,
    Part,
    TextPart,
    Thinking,
    ThinkingPart,
    Tool,
    ToolCallPart,
    ToolChoice,
    ToolResultPart,
)

DIALECT = "anthropic"

HANDLED = {
    "model",
    "messages",
    "system",
    "tools",
    "tool_choice",
    "max_tokens",
    "temperature",
    "top_p",
    "top_k",
    "stop_sequences",
    "stream",
    "metadata",
    "thinking",
}
# Known Anthropic fields without an IR slot: passed through to Anthropic upstreams, no warning.
KNOWN_EXTRAS = {
    "context_management",
    "output_config",
    "output_format",
    "service_tier",
    "container",
    "mcp_servers",
    "inference_geo",
    "betas",
}
TOOL_KEYS = {"name", "description", "input_schema", "type"}


def _text_part(block: dict[str, Any], path: str) -> TextPart:
    text = get_str(block, "text", f"{path}.text", required=True)
    cache_control = get_dict(block, "cache_control", f"{path}.cache_control")
    return TextPart(text or "", cache_control)


def _source(block: dict[str, Any], path: str) -> dict[str, Any]:
    return get_dict(block, "source", f"{path}.source", required=True) or {}


def _image(block: dict[str, Any], path: str) -> ImagePart:
    source = _source(block, path)
    stype = get_str(source, "type", f"{path}.source.type", required=True)
    if stype == "base64":
        return ImagePart(
            media_type=get_str(source, "media_type", f"{path}.source.media_type", required=True),
            data=get_str(source, "data", f"{path}.source.data", required=True),
        )
    if stype == "url":
        return ImagePart(url=get_str(source, "url", f"{path}.source.url", required=True))
    if stype == "file":
        return ImagePart(url=get_str(source, "file_id", f"{path}.source.file_id", required=True))
    raise invalid(f"{path}.source.type: unsupported image source {stype!r}", param=f"{path}.source.type")


def _document(block: dict[str, Any], path: str) -> Part:
    source = _source(block, path)
    stype = get_str(source, "type", f"{path}.source.type", required=True)
    title = get_str(block, "title", f"{path}.title")
    if stype == "base64":
        return FilePart(
            media_type=get_str(source, "media_type", f"{path}.source.media_type", required=True),
            data=get_str(source, "data", f"{path}.source.data", required=True),
            filename=title,
        )
    if stype == "url":
        return FilePart(url=get_str(source, "url", f"{path}.source.url", required=True), filename=title)
    if stype == "file":
        return FilePart(url=get_str(source, "file_id", f"{path}.source.file_id", required=True), filename=title)
    if stype == "text":
        return TextPart(get_str(source, "data", f"{path}.source.data", required=True) or "")
    if stype == "content":
        content = source.get("content")
        if isinstance(content, str):
            return TextPart(content)
        texts = [c.get("text", "") for c in content or [] if isinstance(c, dict) and c.get("type") == "text"]
        return TextPart("\n".join(t for t in texts if isinstance(t, str)))
    raise invalid(f"{path}.source.type: unsupported document source {stype!r}", param=f"{path}.source.type")


def _tool_result(block: dict[str, Any], path: str) -> ToolResultPart:
    tool_use_id = get_str(block, "tool_use_id", f"{path}.tool_use_id", required=True) or ""
    is_error = bool(get_bool(block, "is_error", f"{path}.is_error"))
    content = block.get("content")
    parts: list[TextPart | ImagePart | FilePart] = []
    if isinstance(content, str):
        parts.append(TextPart(content))
    elif isinstance(content, list):
        for i, item in enumerate(content):
            ipath = f"{path}.content[{i}]"
            item = expect_dict(item, ipath)
            itype = get_str(item, "type", f"{ipath}.type", required=True)
            if itype == "text":
                parts.append(_text_part(item, ipath))
            elif itype == "image":
                parts.append(_image(item, ipath))
            elif itype == "document":
                part = _document(item, ipath)
                if isinstance(part, (TextPart, FilePart)):
                    parts.append(part)
            else:
                warn_unknown(DIALECT, f"tool_result content type {itype!r}")
    elif content is not None:
        raise invalid(f"{path}.content: expected a string or an array", param=f"{path}.content")
    return ToolResultPart(tool_use_id, parts, is_error)


def _block(block: Any, path: str) -> Part | None:
    block = expect_dict(block, path)
    btype = get_str(block, "type", f"{path}.type", required=True)
    if btype == "text":
        return _text_part(block, path)
    if btype == "image":
        return _image(block, path)
    if btype == "document":
        return _document(block, path)
    if btype == "tool_use":
        call_id = get_str(block, "id", f"{path}.id", required=True) or ""
        name = get_str(block, "name", f"{path}.name", required=True) or ""
        tool_input = block.get("input")
        if tool_input is None:
            tool_input = {}
        if not isinstance(tool_input, dict):
            raise invalid(f"{path}.input: expected an object", param=f"{path}.input")
        return ToolCallPart(call_id, name, orjson.dumps(tool_input).decode())
    if btype == "tool_result":
        return _tool_result(block, path)
    if btype == "thinking":
        text = get_str(block, "thinking", f"{path}.thinking") or ""
        signature = get_str(block, "signature", f"{path}.signature")
        if signature:
            origin, raw = unpack(signature, DIALECT)
            return ThinkingPart(text, raw, origin)
        return ThinkingPart(text)
    if btype == "redacted_thinking":
        data = get_str(block, "data", f"{path}.data", required=True)
        origin, raw = unpack(data or "", DIALECT)  # another provider's, packed by our encoder
        return ThinkingPart(redacted_data=raw, origin=origin)
    # a server tool's block sent back in the history (server_tool_use, web_search_tool_result …):
    # verbatim for an Anthropic upstream, left out (and reported) for others (items.py)
    return OpaquePart(block, DIALECT)


def _content(value: Any, path: str) -> list[Part]:
    if isinstance(value, str):
        return [TextPart(value)]
    if not isinstance(value, list):
        raise invalid(f"{path}: expected a string or an array of content blocks", param=path)
    parts: list[Part] = []
    for i, block in enumerate(value):
        part = _block(block, f"{path}[{i}]")
        if part is not None:
            parts.append(part)
    return parts


def _messages(body: dict[str, Any]) -> list[Message]:
    messages = get_list(body, "messages", "messages", required=True)
    out: list[Message] = []
    for i, msg in enumerate(messages):
        path = f"messages[{i}]"
        msg = expect_dict(msg, path)
        role = get_str(msg, "role", f"{path}.role", required=True)
        if role not in ("user", "assistant", "system"):
            raise invalid(f"{path}.role: must be 'user' or 'assistant', got {role!r}", param=f"{path}.role")
        if "content" not in msg or msg["content"] is None:
            raise invalid(f"{path}.content: field required", param=f"{path}.content")
        out.append(Message(ROLES[role], _content(msg["content"], f"{path}.content")))
    return out


def _system(body: dict[str, Any]) -> list[TextPart]:
    value = body.get("system")
    if value is None:
        return []
    if isinstance(value, str):
        return [TextPart(value)] if value else []
    if not isinstance(value, list):
        raise invalid("system: expected a string or an array of text blocks", param="system")
    parts: list[TextPart] = []
    for i, block in enumerate(value):
        path = f"system[{i}]"
        block = expect_dict(block, path)
        btype = get_str(block, "type", f"{path}.type", required=True)
        if btype != "text":
            raise invalid(f"{path}.type: system blocks must be 'text', got {btype!r}", param=f"{path}.type")
        parts.append(_text_part(block, path))
    return parts


def _tools(body: dict[str, Any], extras: dict[str, Any]) -> list[Tool]:
    tools = get_list(body, "tools", "tools")
    out: list[Tool] = []
    keep_original = False
    for i, tool in enumerate(tools):
        path = f"tools[{i}]"
        tool = expect_dict(tool, path)
        ttype = get_str(tool, "type", f"{path}.type")
        name = get_str(tool, "name", f"{path}.name", required=True) or ""
        if ttype not in (None, "custom"):
            # A server / client-defined Anthropic tool (web_search_…, bash_…, text_editor_…).
            keep_original = True
            warn_unknown(DIALECT, f"tool type {ttype!r} (only Anthropic upstreams receive it)")
            continue
        schema = get_dict(tool, "input_schema", f"{path}.input_schema", required=True) or {}
        description = get_str(tool, "description", f"{path}.description")
        strict = get_bool(tool, "strict", f"{path}.strict")
        if set(tool) - TOOL_KEYS - {"strict"}:
            keep_original = True
        out.append(Tool(name, description, schema, strict))
    if keep_original:
        extras["tools"] = tools
    return out


def _tool_choice(body: dict[str, Any], req: ChatRequest) -> None:
    choice = get_dict(body, "tool_choice", "tool_choice")
    if choice is None:
        return
    ctype = get_str(choice, "type", "tool_choice.type", required=True)
    if ctype == "auto":
        req.tool_choice = ToolChoice("auto")
    elif ctype == "any":
        req.tool_choice = ToolChoice("required")
    elif ctype == "none":
        req.tool_choice = ToolChoice("none")
    elif ctype == "tool":
        req.tool_choice = ToolChoice("tool", get_str(choice, "name", "tool_choice.name", required=True))
    else:
        raise invalid(f"tool_choice.type: must be auto, any, tool or none, got {ctype!r}", param="tool_choice.type")
    if get_bool(choice, "disable_parallel_tool_use", "tool_choice.disable_parallel_tool_use"):
        req.parallel_tool_calls = False


def _thinking(body: dict[str, Any], req: ChatRequest, extras: dict[str, Any]) -> None:
    thinking = get_dict(body, "thinking", "thinking")
    if thinking is not None:
        ttype = get_str(thinking, "type", "thinking.type", required=True)
        display = get_str(thinking, "display", "thinking.display")
        # Anthropic returns (summarised) thinking text unless display is "omitted": ask the same of others
        include = display != "omitted"
        if ttype == "enabled":
            budget = get_int(thinking, "budget_tokens", "thinking.budget_tokens", required=True, minimum=1)
            req.thinking = Thinking(enabled=True, budget_tokens=budget, include_thoughts=include)
        elif ttype == "adaptive":
            req.thinking = Thinking(enabled=True, include_thoughts=include)
        elif ttype == "disabled":
            req.thinking = Thinking(enabled=False)
        else:
            raise invalid(f"thinking.type: must be enabled, adaptive or disabled, got {ttype!r}", param="thinking.type")
        if ttype == "adaptive" or display is not None or set(thinking) - {"type", "budget_tokens"}:
            extras["thinking"] = thinking
    output_config = get_dict(body, "output_config", "output_config")
    if output_config is not None:
        effort = get_str(output_config, "effort", "output_config.effort")
        if effort is not None:
            if req.thinking is None:
                req.thinking = Thinking()
            req.thinking.effort = "xhigh" if effort == "max" else effort
        fmt = get_dict(output_config, "format", "output_config.format")
        if fmt is not None and fmt.get("type") == "json_schema" and isinstance(fmt.get("schema"), dict):
            req.response_format = {"type": "json_schema", "schema": fmt["schema"]}


def parse_request(body: dict[str, Any], meta: RequestMeta) -> ChatRequest:
    model = get_str(body, "model", "model", required=True) or ""
    extras: dict[str, Any] = {}
    req = ChatRequest(model=model, dialect=DIALECT)
    req.messages = _messages(body)
    req.system = _system(body)
    req.tools = _tools(body, extras)
    _tool_choice(body, req)
    req.max_tokens = get_int(body, "max_tokens", "max_tokens", minimum=1)
    req.temperature = get_float(body, "temperature", "temperature")
    req.top_p = get_float(body, "top_p", "top_p")
    req.top_k = get_int(body, "top_k", "top_k", minimum=0)
    stops = get_list(body, "stop_sequences", "stop_sequences")
    if not all(isinstance(s, str) for s in stops):
        raise invalid("stop_sequences: expected an array of strings", param="stop_sequences")
    req.stop = stops
    req.stream = bool(get_bool(body, "stream", "stream"))
    metadata = get_dict(body, "metadata", "metadata")
    if metadata is not None:
        req.metadata = metadata
        req.user = get_str(metadata, "user_id", "metadata.user_id")
    _thinking(body, req, extras)
    for key, value in body.items():
        if key in HANDLED:
            continue
        if key not in KNOWN_EXTRAS:
            warn_unknown(DIALECT, f"request field {key!r}")
        extras[key] = value
    if extras:
        req.extras[DIALECT] = extras
    beta = meta.headers.get("anthropic-beta")
    if beta:
        req.headers["anthropic-beta"] = beta
    return req
