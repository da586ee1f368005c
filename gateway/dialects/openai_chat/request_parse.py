"""Chat Completions request JSON → ``ChatRequest``.

Every wrong type or missing required field is a 400 naming the field (``common`` getters). Fields
the IR has no slot for (``seed``, ``logprobs``, ``frequency_penalty`` …) are kept in
``req.extras["openai-chat"]`` so an OpenAI-chat upstream still receives them.

Messages: a leading run of ``system``/``developer`` messages becomes ``req.system``; later ones
stay system turns at their place. Consecutive ``tool`` messages become one user message of
``ToolResultPart``s (the shape every other dialect wants). Tool call ids carrying a packed thinking
signature (``<id>~gw~<origin>~<raw>``, see the package docstring) are split: the id keeps the real
part and the signature comes back as a ``ThinkingPart`` right before the ``ToolCallPart``.
"""

from __future__ import annotations

from typing import Any

from gateway.dialects.base import RequestMeta
from gateway.dialects.common import (
    expect_dict,
    get_bool,
    get_dict,
    get_float,
    get_int,
    get_list,
    get_stop,
    get_str,
    warn_unknown,
)
from gateway.dialects.signatures import unpack
from gateway.errors import invalid
from gateway.ir import (
    TOOL_MODES,
    ChatRequest,
    FilePart,
    ImagePart,
    Message,
    Part,
    TextPart,
    Thinking,
    ThinkingPart,
    Tool,
    ToolCallPart,
    ToolChoice,
    ToolResultPart,
)

DIALECT = "openai-chat"
SIG_MARK = "~gw~"

KNOWN = frozenset(
    {
        "model", "messages", "tools", "tool_choice", "parallel_tool_calls", "max_tokens",
        "max_completion_tokens", "temperature", "top_p", "stop", "stream", "stream_options", "user",
        "metadata", "reasoning_effort", "response_format", "n", "store", "prompt_cache_key",
    }
)  # fmt: skip
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
AUDIO_TYPES = {"mp3": "audio/mpeg", "wav": "audio/wav"}


def split_signature(call_id: str) -> tuple[str, ThinkingPart | None]:
    """``"<id>~gw~<origin>~<raw>"`` → (``"<id>"``, ThinkingPart(signature=raw, origin=origin))."""
    pos = call_id.find(SIG_MARK)
    if pos < 0:
        return call_id, None
    origin, raw = unpack(call_id[pos + 1 :], DIALECT)
    return call_id[:pos], ThinkingPart(signature=raw, origin=origin)


def parse_data_url(url: str) -> tuple[str | None, str] | None:
    """``data:<media type>;base64,<data>`` → (media type, base64 data); None if not a base64 data URL."""
    if not url.startswith("data:"):
        return None
    head, sep, data = url[5:].partition(",")
    if not sep or not head.endswith(";base64"):
        return None
    return head[: -len(";base64")] or None, data


def _text_of(content: Any, path: str, allowed: tuple[str, ...] = ("text",)) -> list[str]:
    """Texts of a content that may only hold text (system, developer, tool, assistant)."""
    if isinstance(content, str):
        return [content]
    if content is None:
        return []
    if not isinstance(content, list):
        raise invalid(f"{path}: expected a string or an array of content parts", param=path)
    texts = []
    for j, part in enumerate(content):
        ppath = f"{path}[{j}]"
        part = expect_dict(part, ppath)
        ptype = get_str(part, "type", f"{ppath}.type", required=True)
        if ptype not in allowed:
            raise invalid(
                f"{ppath}.type: {ptype!r} is not allowed here (expected one of {', '.join(allowed)})",
                param=f"{ppath}.type",
            )
        texts.append(get_str(part, ptype, f"{ppath}.{ptype}", required=True) or "")
    return texts


def _user_part(part: Any, path: str) -> Part:
    part = expect_dict(part, path)
    ptype = get_str(part, "type", f"{path}.type", required=True)
    if ptype == "text":
        return TextPart(get_str(part, "text", f"{path}.text", required=True) or "")
    if ptype == "image_url":
        image = get_dict(part, "image_url", f"{path}.image_url", required=True) or {}
        url = get_str(image, "url", f"{path}.image_url.url", required=True) or ""
        get_str(image, "detail", f"{path}.image_url.detail")
        parsed = parse_data_url(url)
        if parsed is not None:
            return ImagePart(media_type=parsed[0], data=parsed[1])
        return ImagePart(url=url)
    if ptype == "input_audio":
        audio = get_dict(part, "input_audio", f"{path}.input_audio", required=True) or {}
        data = get_str(audio, "data", f"{path}.input_audio.data", required=True)
        fmt = get_str(audio, "format", f"{path}.input_audio.format", required=True) or ""
        return FilePart(media_type=AUDIO_TYPES.get(fmt, f"audio/{fmt}"), data=data)
    if ptype == "file":
        file = get_dict(part, "file", f"{path}.file", required=True) or {}
        filename = get_str(file, "filename", f"{path}.file.filename")
        file_data = get_str(file, "file_data", f"{path}.file.file_data")
        file_id = get_str(file, "file_id", f"{path}.file.file_id")
        if file_data:
            parsed = parse_data_url(file_data)
            if parsed is not None:
                return FilePart(media_type=parsed[0], data=parsed[1], filename=filename)
            return FilePart(
                media_type="application/pdf" if (filename or "").endswith(".pdf") else None,
                data=file_data,
                filename=filename,
            )
        if file_id:
            return FilePart(url=file_id, filename=filename)
        raise invalid(f"{path}.file: file_data or file_id required", param=f"{path}.file")
    raise invalid(f"{path}.type: unsupported content part type {ptype!r}", param=f"{path}.type")


def _assistant(m: dict[str, Any], path: str, names: dict[str, str]) -> Message:
    parts: list[Part] = []
    reasoning = get_str(m, "reasoning_content", f"{path}.reasoning_content")
    if reasoning is None:
        reasoning = m.get("reasoning") if isinstance(m.get("reasoning"), str) else None
    if reasoning:
        parts.append(ThinkingPart(text=reasoning))
    texts = _text_of(m.get("content"), f"{path}.content", ("text", "refusal"))
    refusal = get_str(m, "refusal", f"{path}.refusal")
    if refusal:
        texts.append(refusal)
    if any(texts):
        parts.append(TextPart("".join(texts)))
    if m.get("function_call") is not None:
        raise invalid(
            f"{path}.function_call: legacy function calling is not supported; use tool_calls",
            param=f"{path}.function_call",
        )
    for k, call in enumerate(get_list(m, "tool_calls", f"{path}.tool_calls")):
        cpath = f"{path}.tool_calls[{k}]"
        call = expect_dict(call, cpath)
        ctype = get_str(call, "type", f"{cpath}.type")
        if ctype not in (None, "function"):
            raise invalid(
                f"{cpath}.type: only 'function' tool calls are supported, got {ctype!r}", param=f"{cpath}.type"
            )
        call_id, thinking = split_signature(get_str(call, "id", f"{cpath}.id", required=True) or "")
        function = get_dict(call, "function", f"{cpath}.function", required=True) or {}
        name = get_str(function, "name", f"{cpath}.function.name", required=True) or ""
        arguments = function.get("arguments")
        if arguments is None:
            arguments = "{}"
        elif not isinstance(arguments, str):
            raise invalid(f"{cpath}.function.arguments: expected a string of JSON", param=f"{cpath}.function.arguments")
        if thinking is not None:
            reasoning_part = parts[0] if parts and isinstance(parts[0], ThinkingPart) else None
            if thinking.origin == "anthropic" and reasoning_part is not None and reasoning_part.signature is None:
                # An Anthropic signature signs the thinking text itself: rejoin them
                reasoning_part.signature, reasoning_part.origin = thinking.signature, thinking.origin
            else:
                parts.append(thinking)
        parts.append(ToolCallPart(call_id, name, arguments))
        names[call_id] = name
    return Message("assistant", parts)


def _messages(req: ChatRequest, body: dict[str, Any]) -> None:
    messages = get_list(body, "messages", "messages", required=True)
    if not messages:
        raise invalid("messages: at least one message is required", param="messages")
    leading = True
    names: dict[str, str] = {}  # tool call id -> tool name, for ToolResultPart.name
    out = req.messages
    for i, m in enumerate(messages):
        path = f"messages[{i}]"
        m = expect_dict(m, path)
        role = get_str(m, "role", f"{path}.role", required=True)
        if role in ("system", "developer"):
            text = "\n\n".join(_text_of(m.get("content"), f"{path}.content"))
            if leading:
                req.system.append(TextPart(text))
            else:
                out.append(Message("system", [TextPart(text)]))
            continue
        leading = False
        if role == "user":
            content = m.get("content")
            if content is None:
                raise invalid(f"{path}.content: field required", param=f"{path}.content")
            if isinstance(content, str):
                parts: list[Part] = [TextPart(content)]
            elif isinstance(content, list):
                parts = [_user_part(p, f"{path}.content[{j}]") for j, p in enumerate(content)]
            else:
                raise invalid(
                    f"{path}.content: expected a string or an array of content parts", param=f"{path}.content"
                )
            out.append(Message("user", parts))
        elif role == "assistant":
            out.append(_assistant(m, path, names))
        elif role == "tool":
            call_id, _ = split_signature(get_str(m, "tool_call_id", f"{path}.tool_call_id", required=True) or "")
            text = "".join(_text_of(m.get("content"), f"{path}.content"))
            result = ToolResultPart(call_id, [TextPart(text)], name=names.get(call_id))
            last = out[-1] if out else None
            if (
                last is not None
                and last.role == "user"
                and last.content
                and all(isinstance(p, ToolResultPart) for p in last.content)
            ):
                last.content.append(result)
            else:
                out.append(Message("user", [result]))
        elif role == "function":
            raise invalid(f"{path}.role: the legacy 'function' role is not supported; use 'tool'", param=f"{path}.role")
        else:
            raise invalid(f"{path}.role: unknown role {role!r}", param=f"{path}.role")


def _tools(req: ChatRequest, body: dict[str, Any]) -> None:
    for i, t in enumerate(get_list(body, "tools", "tools")):
        path = f"tools[{i}]"
        t = expect_dict(t, path)
        ttype = get_str(t, "type", f"{path}.type", required=True)
        if ttype != "function":
            raise invalid(f"{path}.type: only 'function' tools are supported, got {ttype!r}", param=f"{path}.type")
        fn = get_dict(t, "function", f"{path}.function", required=True) or {}
        params = get_dict(fn, "parameters", f"{path}.function.parameters")
        req.tools.append(
            Tool(
                name=get_str(fn, "name", f"{path}.function.name", required=True) or "",
                description=get_str(fn, "description", f"{path}.function.description"),
                parameters=params if params is not None else {"type": "object", "properties": {}},
                strict=get_bool(fn, "strict", f"{path}.function.strict"),
            )
        )
    choice = body.get("tool_choice")
    if choice is None:
        return
    if isinstance(choice, str):
        if choice not in ("auto", "none", "required"):
            raise invalid(
                f"tool_choice: expected 'auto', 'none', 'required' or an object, got {choice!r}", param="tool_choice"
            )
        req.tool_choice = ToolChoice(TOOL_MODES[choice])
        return
    choice = expect_dict(choice, "tool_choice")
    ctype = get_str(choice, "type", "tool_choice.type", required=True)
    if ctype == "function":
        fn = get_dict(choice, "function", "tool_choice.function", required=True) or {}
        req.tool_choice = ToolChoice("tool", name=get_str(fn, "name", "tool_choice.function.name", required=True))
    elif ctype == "allowed_tools":
        allowed = get_dict(choice, "allowed_tools", "tool_choice.allowed_tools", required=True) or {}
        mode = get_str(allowed, "mode", "tool_choice.allowed_tools.mode") or "auto"
        if mode not in ("auto", "required"):
            raise invalid(
                "tool_choice.allowed_tools.mode: expected 'auto' or 'required'", param="tool_choice.allowed_tools.mode"
            )
        names = []
        for k, t in enumerate(get_list(allowed, "tools", "tool_choice.allowed_tools.tools", required=True)):
            fn = (
                get_dict(
                    expect_dict(t, f"tool_choice.allowed_tools.tools[{k}]"),
                    "function",
                    f"tool_choice.allowed_tools.tools[{k}].function",
                    required=True,
                )
                or {}
            )
            names.append(
                get_str(fn, "name", f"tool_choice.allowed_tools.tools[{k}].function.name", required=True) or ""
            )
        req.tool_choice = ToolChoice(TOOL_MODES[mode], allowed=names)
    else:
        raise invalid(f"tool_choice.type: unsupported {ctype!r}", param="tool_choice.type")


def _response_format(body: dict[str, Any]) -> dict[str, Any] | None:
    rf = get_dict(body, "response_format", "response_format")
    if rf is None:
        return None
    rtype = get_str(rf, "type", "response_format.type", required=True)
    if rtype == "text":
        return None
    if rtype == "json_object":
        return {"type": "json"}
    if rtype == "json_schema":
        js = get_dict(rf, "json_schema", "response_format.json_schema", required=True) or {}
        out: dict[str, Any] = {
            "type": "json_schema",
            "schema": get_dict(js, "schema", "response_format.json_schema.schema") or {},
            "name": get_str(js, "name", "response_format.json_schema.name", required=True),
        }
        strict = get_bool(js, "strict", "response_format.json_schema.strict")
        if strict is not None:
            out["strict"] = strict
        description = get_str(js, "description", "response_format.json_schema.description")
        if description is not None:
            out["description"] = description
        return out
    raise invalid(f"response_format.type: unsupported {rtype!r}", param="response_format.type")


def parse_request(body: dict[str, Any], meta: RequestMeta) -> ChatRequest:
    req = ChatRequest(model=get_str(body, "model", "model", required=True) or "", dialect=DIALECT)
    _messages(req, body)
    _tools(req, body)
    req.parallel_tool_calls = get_bool(body, "parallel_tool_calls", "parallel_tool_calls")
    max_completion = get_int(body, "max_completion_tokens", "max_completion_tokens", minimum=1)
    req.max_tokens = (
        max_completion if max_completion is not None else get_int(body, "max_tokens", "max_tokens", minimum=1)
    )
    req.temperature = get_float(body, "temperature", "temperature")
    req.top_p = get_float(body, "top_p", "top_p")
    req.stop = get_stop(body, "stop", "stop")
    req.stream = bool(get_bool(body, "stream", "stream"))
    options = get_dict(body, "stream_options", "stream_options") or {}
    req.include_usage = bool(get_bool(options, "include_usage", "stream_options.include_usage"))
    req.user = get_str(body, "user", "user")
    req.metadata = get_dict(body, "metadata", "metadata")
    req.store = get_bool(body, "store", "store")
    req.prompt_cache_key = get_str(body, "prompt_cache_key", "prompt_cache_key")
    effort = get_str(body, "reasoning_effort", "reasoning_effort")
    if effort is not None:
        if effort not in EFFORTS:
            raise invalid(
                f"reasoning_effort: expected one of {', '.join(EFFORTS)}, got {effort!r}", param="reasoning_effort"
            )
        req.thinking = Thinking(enabled=False) if effort == "none" else Thinking(enabled=True, effort=effort)
    req.response_format = _response_format(body)
    n = get_int(body, "n", "n", minimum=1)
    if n is not None and n != 1:
        raise invalid("n: only n=1 is supported by this gateway", param="n")
    extras = {k: v for k, v in body.items() if k not in KNOWN}
    if extras:
        for k in extras:
            warn_unknown(DIALECT, f"request field {k!r} (passed through to OpenAI-chat upstreams only)")
        req.extras[DIALECT] = extras
    return req
