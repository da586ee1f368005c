"""``ChatRequest`` -> a streamed ``POST /responses`` call.

Stateless by design: ``store`` is false whenever reasoning is requested and
``reasoning.encrypted_content`` is included, so reasoning items come back to the caller as
signatures and return on the next turn without a server-side response store.
"""

from __future__ import annotations

import logging
from typing import Any

from gateway.dialects.base import BuildOptions, UpstreamCall
from gateway.dialects.common import openai_user
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

from .client_tools import native_item
from .request_parse import FILE_ID_SCHEME

DIALECT = "openai-responses"
log = logging.getLogger("gateway.dialects.openai_responses")

# extras keys the parser uses for its own bookkeeping (never sent as top-level fields)
INTERNAL = {
    "tools_hosted",
    "tools_native",
    "tool_namespaces",
    "namespace_info",
    "tool_choice_hosted",
    "verbosity",
    "reasoning_summary",
    "reasoning_extra",
}


def build_request(req: ChatRequest, upstream_model: str, options: BuildOptions) -> UpstreamCall:
    extras = req.extras.get(DIALECT, {})
    namespaces: dict[str, dict[str, str]] = extras.get("tool_namespaces") or {}
    body: dict[str, Any] = {"model": upstream_model}
    if req.system:
        body["instructions"] = "\n\n".join(p.text for p in req.system)
    body["input"] = _input_items(req.messages, namespaces, extras.get("tools_native") or {})

    tools = _tools(req, extras, namespaces)
    if tools:
        body["tools"] = tools
    choice = _tool_choice(req, extras, namespaces)
    if choice is not None:
        body["tool_choice"] = choice
    if req.parallel_tool_calls is not None:
        body["parallel_tool_calls"] = req.parallel_tool_calls
    if req.max_tokens is not None:
        body["max_output_tokens"] = req.max_tokens
    if req.temperature is not None:
        body["temperature"] = req.temperature
    if req.top_p is not None:
        body["top_p"] = req.top_p
    # stop has no Responses field: refused or dropped before this builder runs (fields.py)

    reasoning = _reasoning(req, extras)
    include: list[str] = list(extras.get("include") or [])
    if reasoning is not None:
        body["reasoning"] = reasoning
        body["store"] = False
        if "reasoning.encrypted_content" not in include:
            include.append("reasoning.encrypted_content")
    elif req.store is not None:
        body["store"] = req.store
    if include:
        body["include"] = include

    text: dict[str, Any] = {}
    if req.response_format:
        rf = req.response_format
        if rf.get("type") == "json_schema":
            fmt: dict[str, Any] = {
                "type": "json_schema",
                "name": rf.get("name") or "response",
                "schema": rf.get("schema") or {},
            }
            for key in ("strict", "description"):
                if rf.get(key) is not None:
                    fmt[key] = rf[key]
            text["format"] = fmt
        elif rf.get("type") in ("json", "json_object"):
            text["format"] = {"type": "json_object"}
    if extras.get("verbosity") is not None:
        text["verbosity"] = extras["verbosity"]
    if text:
        body["text"] = text
    if req.metadata and all(isinstance(v, str) for v in req.metadata.values()):
        body["metadata"] = req.metadata
    if req.user and extras.get("safety_identifier") != req.user:
        body["user"] = openai_user(req.user)

    if req.prompt_cache_key is not None:  # from any OpenAI caller (Chat or Responses: the same field)
        body["prompt_cache_key"] = req.prompt_cache_key
    for key, value in extras.items():
        if key not in INTERNAL and key != "include":
            body[key] = value
    body["stream"] = options.stream
    return UpstreamCall(path="/responses", body=body)


def _reasoning(req: ChatRequest, extras: dict[str, Any]) -> dict[str, Any] | None:
    t = req.thinking
    if t is None or t.enabled is False:
        return None
    out: dict[str, Any] = dict(extras.get("reasoning_extra") or {})
    effort = (
        level_of(t) if req.dialect != DIALECT or t.effort else None
    )  # a Responses caller's own summary-only ask stays so
    if effort is not None:
        out["effort"] = effort
    summary = extras.get("reasoning_summary")
    if summary is not None:
        out["summary"] = summary
    elif t.include_thoughts:
        out["summary"] = "auto"
    return out


# --------------------------------------------------------------------------- input items


def _call_name(name: str, namespaces: dict[str, dict[str, str]]) -> dict[str, str]:
    ns = namespaces.get(name)
    return {"name": ns["name"], "namespace": ns["namespace"]} if ns else {"name": name}


def _image(p: ImagePart) -> dict[str, Any]:
    if p.url and p.url.startswith(FILE_ID_SCHEME):
        return {"type": "input_image", "file_id": p.url[len(FILE_ID_SCHEME) :], "detail": "auto"}
    url = p.url if p.url else f"data:{p.media_type or 'image/png'};base64,{p.data or ''}"
    return {"type": "input_image", "image_url": url, "detail": "auto"}


def _file(p: FilePart) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "input_file"}
    if p.url and p.url.startswith(FILE_ID_SCHEME):
        out["file_id"] = p.url[len(FILE_ID_SCHEME) :]
    elif p.url:
        out["file_url"] = p.url
    else:
        out["file_data"] = f"data:{p.media_type or 'application/octet-stream'};base64,{p.data or ''}"
    if p.filename:
        out["filename"] = p.filename
    elif "file_data" in out:
        out["filename"] = "file.pdf" if p.media_type == "application/pdf" else "file"
    return out


def _tool_output(part: ToolResultPart) -> str | list[dict[str, Any]]:
    texts = [c.text for c in part.content if isinstance(c, TextPart)]
    if len(texts) == len(part.content):  # text only: the output is a string
        return "".join(texts)
    out: list[dict[str, Any]] = []
    for c in part.content:
        if isinstance(c, TextPart):
            out.append({"type": "input_text", "text": c.text})
        elif isinstance(c, ImagePart):
            out.append(_image(c))
        elif isinstance(c, FilePart):
            out.append(_file(c))
    return out


def _input_items(
    messages: list[Message], namespaces: dict[str, dict[str, str]], native: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    custom_calls: set[str] = set()  # call ids of custom tool calls another upstream answered
    for msg in messages:
        if msg.role == "assistant":
            _assistant_items(msg, items, namespaces, native, custom_calls)
            continue
        role = "developer" if msg.role == "system" else "user"
        content: list[dict[str, Any]] = []
        for part in msg.content:
            if isinstance(part, TextPart):
                content.append({"type": "input_text", "text": part.text})
            elif isinstance(part, ImagePart):
                content.append(_image(part))
            elif isinstance(part, FilePart):
                content.append(_file(part))
            elif isinstance(part, ToolResultPart):
                _flush_message(items, role, content)
                if part.item is not None and part.origin == DIALECT:  # a custom / shell … result, verbatim
                    items.append(part.item)
                    continue
                if part.tool_call_id in custom_calls:
                    output = {"type": "custom_tool_call_output", "call_id": part.tool_call_id}
                    items.append({**output, "output": _tool_output(part)})
                    continue
                items.append(
                    {"type": "function_call_output", "call_id": part.tool_call_id, "output": _tool_output(part)}
                )
            elif isinstance(part, OpaquePart) and part.origin == DIALECT:
                _flush_message(items, role, content)
                items.append(part.item)
        _flush_message(items, role, content)
    return items


def _flush_message(items: list[dict[str, Any]], role: str, content: list[dict[str, Any]]) -> None:
    """The caller's parts gathered so far as one message item (a tool result splits a turn)."""
    if content:
        items.append({"type": "message", "role": role, "content": list(content)})
        content.clear()


def _assistant_items(
    msg: Message,
    items: list[dict[str, Any]],
    namespaces: dict[str, dict[str, str]],
    native: dict[str, dict[str, Any]],
    custom_calls: set[str],
) -> None:
    """``native``: the caller's custom tools (client_tools.py): a call of one that another upstream
    made (a stored turn, a fallback) is written as the ``custom_tool_call`` OpenAI expects."""
    text: list[str] = []

    def flush() -> None:
        if text:
            items.append({"type": "message", "role": "assistant", "content": "".join(text)})
            text.clear()

    for part in msg.content:
        if isinstance(part, TextPart):
            text.append(part.text)
        elif isinstance(part, ToolCallPart) and part.item is not None and part.origin == DIALECT:
            flush()
            items.append(part.item)  # a custom / shell / apply-patch call, verbatim (items.py)
        elif isinstance(part, OpaquePart):
            if part.origin == DIALECT:  # a server tool's item, verbatim; another dialect's: left out
                flush()
                items.append(part.item)
        elif isinstance(part, ToolCallPart) and (native.get(part.name) or {}).get("type") == "custom":
            flush()
            ns = (namespaces.get(part.name) or {}).get("namespace")
            call = native_item(native[part.name], part.id, part.arguments, namespace=ns)
            call.pop("id")  # an id OpenAI never issued
            custom_calls.add(part.id)
            items.append(call)
        elif isinstance(part, ToolCallPart):
            flush()
            items.append(
                {
                    "type": "function_call",
                    "call_id": part.id,
                    **_call_name(part.name, namespaces),
                    "arguments": part.arguments or "{}",
                }
            )
        elif isinstance(part, ThinkingPart):
            if part.origin == DIALECT and part.signature:
                flush()
                summary = [{"type": "summary_text", "text": part.text}] if part.text else []
                items.append({"type": "reasoning", "summary": summary, "encrypted_content": part.signature})
        # images in assistant turns have no Responses input form: dropped
    flush()


# --------------------------------------------------------------------------- tools


def _tools(req: ChatRequest, extras: dict[str, Any], namespaces: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    grouped: dict[str, dict[str, Any]] = {}
    ns_info: dict[str, dict[str, Any]] = extras.get("namespace_info") or {}
    native: dict[str, dict[str, Any]] = extras.get("tools_native") or {}
    for tool in req.tools:
        fn: dict[str, Any] = {"type": "function", "name": tool.name, "parameters": tool.parameters}
        if tool.description is not None:
            fn["description"] = tool.description
        if tool.strict is not None:
            fn["strict"] = tool.strict
        ns = namespaces.get(tool.name)
        if tool.name in native:  # the caller's own custom / shell / apply_patch tool, verbatim
            fn = native[tool.name]
        elif ns is not None:
            fn["name"] = ns["name"]
        if ns is None:
            out.append(fn)
            continue
        container = grouped.get(ns["namespace"])
        if container is None:
            container = {
                "type": "namespace",
                "name": ns["namespace"],
                "description": (ns_info.get(ns["namespace"]) or {}).get("description") or "",
                "tools": [],
            }
            grouped[ns["namespace"]] = container
            out.append(container)
        container["tools"].append(fn)
    out.extend(extras.get("tools_hosted") or [])
    return out


def _tool_choice(req: ChatRequest, extras: dict[str, Any], namespaces: dict[str, dict[str, str]]) -> Any:
    if extras.get("tool_choice_hosted") is not None:
        return extras["tool_choice_hosted"]
    c = req.tool_choice
    if c is None:
        return None
    native: dict[str, dict[str, Any]] = extras.get("tools_native") or {}

    def named(name: str) -> dict[str, Any]:
        tool = native.get(name)
        if tool is None:
            return {"type": "function", **_call_name(name, namespaces)}
        if tool.get("type") == "custom":
            return {"type": "custom", "name": tool.get("name")}
        return {"type": tool.get("type")}

    if c.mode == "tool" and c.name:
        return named(c.name)
    if c.allowed is not None and c.mode in ("auto", "required"):
        return {"type": "allowed_tools", "mode": c.mode, "tools": [named(n) for n in c.allowed]}
    return c.mode
