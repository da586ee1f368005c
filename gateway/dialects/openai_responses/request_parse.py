"""Responses request JSON -> ``ChatRequest``.

Input items are folded into chat turns: ``function_call`` and ``reasoning`` items join the
assistant turn they belong to, ``function_call_output`` items become a user turn of tool results.
Codex ``namespace`` tools are flattened to ``<namespace>__<name>`` function tools; the mapping is
kept in ``extras["openai-responses"]["tool_namespaces"]`` so a Responses builder and encoder can
restore the namespaced names. Hosted tools (web_search, mcp, …) can only run at OpenAI: they are
kept in ``extras["openai-responses"]["tools_hosted"]`` for a same-dialect upstream (reported as
dropped for any other). Tools the caller runs itself — ``custom`` (Codex's ``apply_patch``),
``shell``, ``local_shell``, ``apply_patch`` — are function tools for other upstreams and kept
verbatim in ``extras["openai-responses"]["tools_native"]`` (client_tools.py). Tools declared in
the input (``additional_tools`` items: Codex's requests for current model slugs) are the
request's tools as if declared at the top.
"""

from __future__ import annotations

from typing import Any

from gateway.dialects import signatures
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
from gateway.errors import invalid
from gateway.ir import (
    TOOL_MODES,
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

from . import client_tools
from .items import CLIENT_CALLS, CLIENT_RESULTS, client_call, client_result

DIALECT = "openai-responses"
NS_SEP = "__"
FILE_ID_SCHEME = "openai-file://"  # an OpenAI file id inside an ImagePart/FilePart url

# Fields with no IR slot that a Responses upstream understands: kept without a warning.
PASSTHROUGH = (
    "include",
    "prompt_cache_retention",
    "client_metadata",
    "truncation",
    "service_tier",
    "safety_identifier",
    "top_logprobs",
    "max_tool_calls",
    "prompt",
    "stream_options",
)
HANDLED = {
    "model",
    "prompt_cache_key",
    "input",
    "instructions",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "max_output_tokens",
    "temperature",
    "top_p",
    "reasoning",
    "store",
    "metadata",
    "user",
    "text",
    "stream",
    "previous_response_id",
    "background",
    "conversation",
}
# Input item types produced by hosted tools: context only OpenAI can use; dropped elsewhere.
HOSTED_ITEMS = {
    "web_search_call",
    "file_search_call",
    "computer_call",
    "computer_call_output",
    "image_generation_call",
    "code_interpreter_call",
    "local_shell_call",
    "local_shell_call_output",
    "mcp_list_tools",
    "mcp_approval_request",
    "mcp_approval_response",
    "mcp_call",
    "custom_tool_call",
    "custom_tool_call_output",
    "shell_call",
    "shell_call_output",
    "apply_patch_call",
    "apply_patch_call_output",
    "tool_search_call",
    "tool_search_output",
    "compaction",
}


def parse_request(body: dict[str, Any], meta: RequestMeta) -> ChatRequest:
    model = get_str(body, "model", "model", required=True)
    if not model:
        raise invalid("model: must not be empty", param="model")
    if body.get("conversation") is not None:
        raise invalid(
            "conversation needs a conversation store; this gateway does not keep one: send previous_response_id or the full input",
            param="conversation",
        )

    extras: dict[str, Any] = {}
    req = ChatRequest(model=model, dialect=DIALECT)
    # Resolved by the stateful layer (gateway/relay/stateful.py) from the response store.
    req.previous_id = get_str(body, "previous_response_id", "previous_response_id")
    req.background = bool(get_bool(body, "background", "background"))
    instructions = get_str(body, "instructions", "instructions")
    if instructions:
        req.system.append(TextPart(instructions))
    declared: list[Any] = []  # tools declared in the input (``additional_tools`` items)
    _parse_input(body.get("input"), req, declared)
    _parse_tools(declared + get_list(body, "tools", "tools"), req, extras)
    _parse_tool_choice(body.get("tool_choice"), req, extras)

    req.parallel_tool_calls = get_bool(body, "parallel_tool_calls", "parallel_tool_calls")
    req.max_tokens = get_int(body, "max_output_tokens", "max_output_tokens", minimum=1)
    req.temperature = get_float(body, "temperature", "temperature")
    req.top_p = get_float(body, "top_p", "top_p")
    req.store = get_bool(body, "store", "store")
    req.store_here = True  # the gateway keeps stored responses itself (gateway/relay/stateful.py)
    req.metadata = get_dict(body, "metadata", "metadata")
    req.user = get_str(body, "user", "user") or get_str(body, "safety_identifier", "safety_identifier")
    req.stream = bool(get_bool(body, "stream", "stream"))
    req.thinking = _parse_reasoning(get_dict(body, "reasoning", "reasoning"), extras)
    _parse_text(get_dict(body, "text", "text"), req, extras)

    req.prompt_cache_key = get_str(body, "prompt_cache_key", "prompt_cache_key")
    include = body.get("include")
    if include is not None and not (isinstance(include, list) and all(isinstance(x, str) for x in include)):
        raise invalid("include: expected an array of strings", param="include")
    for key, value in body.items():
        if key in HANDLED:
            continue
        if key not in PASSTHROUGH:
            warn_unknown(DIALECT, f"request field {key!r}")
        extras[key] = value
    if extras:
        req.extras[DIALECT] = extras
    return req


# --------------------------------------------------------------------------- input items


def _parse_input(value: Any, req: ChatRequest, declared: list[Any]) -> None:
    if value is None:
        raise invalid("input: field required", param="input")
    if isinstance(value, str):
        req.messages.append(Message("user", [TextPart(value)]))
        return
    if not isinstance(value, list):
        raise invalid(f"input: expected a string or an array, got {type(value).__name__}", param="input")
    msgs = req.messages
    for i, raw in enumerate(value):
        path = f"input[{i}]"
        item = expect_dict(raw, path)
        kind = get_str(item, "type", f"{path}.type")
        if kind is None or kind == "message":
            _message_item(item, path, req)
        elif kind == "function_call":
            call_id = get_str(item, "call_id", f"{path}.call_id", required=True) or ""
            name = get_str(item, "name", f"{path}.name", required=True) or ""
            arguments = item.get("arguments", "")
            if not isinstance(arguments, str):
                raise invalid(f"{path}.arguments: expected a string", param=f"{path}.arguments")
            ns = get_str(item, "namespace", f"{path}.namespace")
            if ns:
                name = f"{ns}{NS_SEP}{name}"
            _assistant(msgs).content.append(ToolCallPart(call_id, name, arguments or "{}"))
        elif kind == "function_call_output":
            call_id = get_str(item, "call_id", f"{path}.call_id", required=True) or ""
            content = _tool_output(item.get("output"), f"{path}.output")
            _tool_result(msgs, ToolResultPart(call_id, content))
        elif kind == "reasoning":
            _assistant(msgs).content.append(_reasoning_item(item, path))
        elif kind == "additional_tools":
            # Codex's "Responses lite" requests (current model slugs) declare their tools in the
            # input, at the place they join, and none at the top: they are the request's tools
            # (every upstream is sent them as its own tool list; a Responses one at the top).
            declared.extend(get_list(item, "tools", f"{path}.tools"))
        elif kind == "item_reference":
            raise invalid(
                f"{path}: item_reference needs a response store; this gateway does not keep one: send the item itself",
                param=path,
            )
        elif kind in CLIENT_CALLS:  # custom / shell / apply-patch calls: function calls elsewhere (items.py)
            call_id, name, args = client_call(item) or ("", "", "{}")
            ns = item.get("namespace")
            if isinstance(ns, str) and ns:  # a custom tool declared in a namespace: its flattened name
                name = f"{ns}{NS_SEP}{name}"
            _assistant(msgs).content.append(ToolCallPart(call_id, name, args, item, DIALECT))
        elif kind in CLIENT_RESULTS:
            call_id, text = client_result(item) or ("", "")
            _tool_result(msgs, ToolResultPart(call_id, [TextPart(text)], item=item, origin=DIALECT))
        elif kind in HOSTED_ITEMS:  # a server tool's item: verbatim for a Responses upstream only
            _assistant(msgs).content.append(OpaquePart(item, DIALECT))
        else:
            raise invalid(f"{path}.type: unsupported input item type {kind!r}", param=f"{path}.type")


def _tool_result(msgs: list[Message], part: ToolResultPart) -> None:
    """Consecutive tool results share one user turn."""
    last = msgs[-1] if msgs else None
    if (
        last is not None
        and last.role == "user"
        and last.content
        and all(isinstance(p, ToolResultPart) for p in last.content)
    ):
        last.content.append(part)
    else:
        msgs.append(Message("user", [part]))


def _assistant(msgs: list[Message]) -> Message:
    """The open assistant turn: reasoning, text and calls of one turn share one message."""
    if msgs and msgs[-1].role == "assistant":
        return msgs[-1]
    msg = Message("assistant", [])
    msgs.append(msg)
    return msg


def _message_item(item: dict[str, Any], path: str, req: ChatRequest) -> None:
    role = get_str(item, "role", f"{path}.role", required=True)
    if role not in ("user", "assistant", "system", "developer"):
        raise invalid(f"{path}.role: expected user, assistant, system or developer, got {role!r}", param=f"{path}.role")
    parts = _content(item.get("content"), f"{path}.content")
    if role in ("system", "developer"):
        texts = [p for p in parts if isinstance(p, TextPart)]
        if len(texts) != len(parts):
            raise invalid(f"{path}.content: {role} messages take text only", param=f"{path}.content")
        if not req.messages:
            req.system.extend(texts)
        else:
            req.messages.append(Message("system", list(texts)))
    elif role == "assistant":
        _assistant(req.messages).content.extend(parts)
    else:
        req.messages.append(Message("user", parts))


def _content(value: Any, path: str) -> list[Part]:
    if isinstance(value, str):
        return [TextPart(value)]
    if not isinstance(value, list):
        raise invalid(f"{path}: expected a string or an array", param=path)
    return [_content_part(expect_dict(p, f"{path}[{j}]"), f"{path}[{j}]") for j, p in enumerate(value)]


def _content_part(part: dict[str, Any], path: str) -> Part:
    kind = get_str(part, "type", f"{path}.type")
    if kind in ("input_text", "output_text", "text", "summary_text", "reasoning_text"):
        return TextPart(get_str(part, "text", f"{path}.text", required=True) or "")
    if kind == "refusal":
        return TextPart(get_str(part, "refusal", f"{path}.refusal", required=True) or "")
    if kind == "input_image":
        url = get_str(part, "image_url", f"{path}.image_url")
        file_id = get_str(part, "file_id", f"{path}.file_id")
        if url:
            media_type, data = _split_data_url(url)
            return ImagePart(media_type, data) if data is not None else ImagePart(url=url)
        if file_id:
            return ImagePart(url=FILE_ID_SCHEME + file_id)
        raise invalid(f"{path}: input_image needs image_url or file_id", param=path)
    if kind == "input_file":
        filename = get_str(part, "filename", f"{path}.filename")
        file_data = get_str(part, "file_data", f"{path}.file_data")
        file_url = get_str(part, "file_url", f"{path}.file_url")
        file_id = get_str(part, "file_id", f"{path}.file_id")
        if file_data:
            media_type, data = _split_data_url(file_data)
            if data is None:  # bare base64
                media_type, data = _guess_media_type(filename), file_data
            return FilePart(media_type, data, filename=filename)
        if file_url:
            return FilePart(_guess_media_type(filename), url=file_url, filename=filename)
        if file_id:
            return FilePart(url=FILE_ID_SCHEME + file_id, filename=filename)
        raise invalid(f"{path}: input_file needs file_data, file_url or file_id", param=path)
    raise invalid(f"{path}.type: unsupported content part type {kind!r}", param=f"{path}.type")


def _split_data_url(url: str) -> tuple[str | None, str | None]:
    """``data:<mt>;base64,<data>`` -> (mt, data); anything else -> (None, None)."""
    if not url.startswith("data:"):
        return None, None
    head, sep, data = url[5:].partition(",")
    if not sep or not head.endswith(";base64"):
        return None, None
    return head[: -len(";base64")] or None, data


def _guess_media_type(filename: str | None) -> str | None:
    if filename and filename.lower().endswith(".pdf"):
        return "application/pdf"
    return None


def _tool_output(value: Any, path: str) -> list[TextPart | ImagePart | FilePart]:
    if value is None:
        raise invalid(f"{path}: field required", param=path)
    if isinstance(value, str):
        return [TextPart(value)]
    if isinstance(value, list):
        out: list[TextPart | ImagePart | FilePart] = []
        for j, raw in enumerate(value):
            part = _content_part(expect_dict(raw, f"{path}[{j}]"), f"{path}[{j}]")
            if not isinstance(part, (TextPart, ImagePart, FilePart)):
                raise invalid(f"{path}[{j}]: unsupported tool output part", param=f"{path}[{j}]")
            out.append(part)
        return out
    raise invalid(f"{path}: expected a string or an array", param=path)


def _reasoning_item(item: dict[str, Any], path: str) -> ThinkingPart:
    texts: list[str] = []
    for j, s in enumerate(get_list(item, "summary", f"{path}.summary")):
        s = expect_dict(s, f"{path}.summary[{j}]")
        texts.append(get_str(s, "text", f"{path}.summary[{j}].text") or "")
    if not texts:  # raw reasoning text (open-weight models) when there is no summary
        for j, c in enumerate(get_list(item, "content", f"{path}.content")):
            c = expect_dict(c, f"{path}.content[{j}]")
            texts.append(get_str(c, "text", f"{path}.content[{j}].text") or "")
    part = ThinkingPart(text="\n\n".join(t for t in texts if t))
    enc = get_str(item, "encrypted_content", f"{path}.encrypted_content")
    if enc:
        part.origin, part.signature = signatures.unpack(enc, DIALECT)
    return part


# --------------------------------------------------------------------------- tools


def _function_tool(t: dict[str, Any], path: str, name_prefix: str = "") -> Tool:
    name = get_str(t, "name", f"{path}.name", required=True) or ""
    params = get_dict(t, "parameters", f"{path}.parameters")
    tool = Tool(
        name_prefix + name,
        get_str(t, "description", f"{path}.description"),
        strict=get_bool(t, "strict", f"{path}.strict"),
    )
    if params is not None:
        tool.parameters = params
    return tool


def _parse_tools(tools: list[Any], req: ChatRequest, extras: dict[str, Any]) -> None:
    hosted: list[dict[str, Any]] = []
    namespaces: dict[str, dict[str, str]] = {}
    ns_info: dict[str, dict[str, Any]] = {}
    native: dict[str, dict[str, Any]] = {}
    for i, raw in enumerate(tools):
        path = f"tools[{i}]"
        t = expect_dict(raw, path)
        kind = get_str(t, "type", f"{path}.type")
        if kind == "function":
            req.tools.append(_function_tool(t, path))
        elif kind == "namespace":
            ns = get_str(t, "name", f"{path}.name", required=True) or ""
            ns_info[ns] = {"description": t.get("description")}
            others: list[Any] = []
            for j, inner in enumerate(get_list(t, "tools", f"{path}.tools")):
                ipath = f"{path}.tools[{j}]"
                inner = expect_dict(inner, ipath)
                if inner.get("type") == "function":
                    tool = _function_tool(inner, ipath, f"{ns}{NS_SEP}")
                    namespaces[tool.name] = {"namespace": ns, "name": tool.name[len(ns) + len(NS_SEP) :]}
                    req.tools.append(tool)
                elif inner.get("type") in client_tools.TYPES:  # a custom tool in a namespace (Codex's exec)
                    tool = client_tools.declare(inner)
                    namespaces[f"{ns}{NS_SEP}{tool.name}"] = {"namespace": ns, "name": tool.name}
                    tool.name = f"{ns}{NS_SEP}{tool.name}"
                    native[tool.name] = inner
                    req.tools.append(tool)
                else:
                    others.append(inner)
            if others:
                hosted.append({**t, "tools": others})
        elif kind in client_tools.TYPES:  # run by the caller: a function for other upstreams
            if kind == "custom":
                get_str(t, "name", f"{path}.name", required=True)
            tool = client_tools.declare(t)
            native[tool.name] = t
            req.tools.append(tool)
        elif isinstance(kind, str):
            warn_unknown(DIALECT, f"hosted tool {kind!r} (kept only for a Responses upstream)")
            hosted.append(t)
        else:
            raise invalid(f"{path}.type: field required", param=f"{path}.type")
    if hosted:
        extras["tools_hosted"] = hosted
    if native:
        extras[client_tools.NATIVE_KEY] = native
    if namespaces:
        extras["tool_namespaces"] = namespaces
        extras["namespace_info"] = ns_info


def _parse_tool_choice(value: Any, req: ChatRequest, extras: dict[str, Any]) -> None:
    if value is None:
        return
    if isinstance(value, str):
        if value not in ("auto", "none", "required"):
            raise invalid(f"tool_choice: expected auto, none or required, got {value!r}", param="tool_choice")
        req.tool_choice = ToolChoice(TOOL_MODES[value])
        return
    choice = expect_dict(value, "tool_choice")
    kind = get_str(choice, "type", "tool_choice.type")
    if kind == "function":
        name = get_str(choice, "name", "tool_choice.name", required=True) or ""
        ns = get_str(choice, "namespace", "tool_choice.namespace")
        req.tool_choice = ToolChoice("tool", f"{ns}{NS_SEP}{name}" if ns else name)
    elif kind == "custom":
        req.tool_choice = ToolChoice("tool", get_str(choice, "name", "tool_choice.name", required=True) or "")
    elif kind in client_tools.TYPES:  # shell / local_shell / apply_patch: their function's name
        req.tool_choice = ToolChoice("tool", client_tools.declare({"type": kind}).name)
    elif kind == "allowed_tools":
        mode = get_str(choice, "mode", "tool_choice.mode") or "auto"
        if mode not in ("auto", "required"):
            raise invalid("tool_choice.mode: expected auto or required", param="tool_choice.mode")
        names = []
        for j, t in enumerate(get_list(choice, "tools", "tool_choice.tools")):
            t = expect_dict(t, f"tool_choice.tools[{j}]")
            if t.get("type") in ("function", "custom") and isinstance(t.get("name"), str):
                names.append(t["name"])
            elif t.get("type") in client_tools.TYPES:
                names.append(client_tools.declare(t).name)
        req.tool_choice = ToolChoice(TOOL_MODES[mode], allowed=names)
    elif isinstance(kind, str):
        warn_unknown(DIALECT, f"hosted tool_choice {kind!r}")
        extras["tool_choice_hosted"] = choice
    else:
        raise invalid("tool_choice.type: field required", param="tool_choice.type")


# --------------------------------------------------------------------------- reasoning, text


def _parse_reasoning(r: dict[str, Any] | None, extras: dict[str, Any]) -> Thinking | None:
    if r is None:
        return None
    effort = get_str(r, "effort", "reasoning.effort")
    summary = get_str(r, "summary", "reasoning.summary") or get_str(r, "generate_summary", "reasoning.generate_summary")
    rest = {k: v for k, v in r.items() if k not in ("effort", "summary", "generate_summary")}
    if rest:
        extras["reasoning_extra"] = rest
    if summary is not None:
        extras["reasoning_summary"] = summary
    thinking = Thinking(include_thoughts=summary not in (None, "none"))
    if effort == "none":
        thinking.enabled = False
    else:
        thinking.enabled = True
        thinking.effort = effort
    return thinking


def _parse_text(t: dict[str, Any] | None, req: ChatRequest, extras: dict[str, Any]) -> None:
    if t is None:
        return
    fmt = get_dict(t, "format", "text.format")
    if fmt is not None:
        kind = get_str(fmt, "type", "text.format.type")
        if kind == "json_schema":
            schema = get_dict(fmt, "schema", "text.format.schema", required=True)
            rf: dict[str, Any] = {"type": "json_schema", "schema": schema}
            for key in ("name", "strict", "description"):
                if fmt.get(key) is not None:
                    rf[key] = fmt[key]
            req.response_format = rf
        elif kind == "json_object":
            req.response_format = {"type": "json"}
        elif kind not in ("text", None):
            raise invalid(f"text.format.type: unsupported {kind!r}", param="text.format.type")
    if t.get("verbosity") is not None:
        extras["verbosity"] = t["verbosity"]
