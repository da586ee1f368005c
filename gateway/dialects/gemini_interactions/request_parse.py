"""Caller JSON (``POST /v1beta/interactions``) -> ``ChatRequest``.

``input`` comes in four forms (INTERACTIONS.md §2): a string; one content block; a list of content
blocks (one user turn, what the Node SDK sends); a list of steps (what the Python SDK sends, and
the only form that carries history). Steps map to IR messages; consecutive steps of one side merge
into one message (``model_output`` / ``thought`` / ``function_call`` are the assistant's;
``user_input`` / ``function_result`` the user's), so every builder sees alternating turns.

Stateful fields are not resolved here: ``previous_interaction_id``, ``background``,
``continuation_token`` and ``agent`` are kept in ``extras["gemini-interactions"]`` for the
stateful layer (which prepends the stored history before the request is routed). Built-in tools
(``google_search`` …) and Interactions-only generation settings are kept there too, so a builder
of this dialect passes them through; other builders drop them (warned here).
"""

from __future__ import annotations

from typing import Any

import orjson

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
    new_id,
    warn_unknown,
)
from gateway.dialects.thinking import EFFORTS
from gateway.errors import invalid
from gateway.ir import (
    ChatRequest,
    FilePart,
    ImagePart,
    Message,
    OpaquePart,
    Part,
    Role,
    TextPart,
    Thinking,
    ThinkingPart,
    Tool,
    ToolCallPart,
    ToolChoice,
    ToolMode,
    ToolResultPart,
)

DIALECT = "gemini-interactions"

CONTENT_TYPES = frozenset({"text", "image", "audio", "document", "video"})
_ASSISTANT_STEPS = frozenset({"model_output", "thought", "function_call"})
_USER_STEPS = frozenset({"user_input", "function_result"})

# Top-level keys kept verbatim in extras (no IR slot); the stateful ones are read by the store layer.
_PASSTHROUGH = (
    "previous_interaction_id",
    "background",
    "continuation_token",
    "agent",
    "agent_config",
    "response_modalities",
    "safety_settings",
    "service_tier",
    "cached_content",
    "labels",
    "environment",
    "webhook_config",
)
_HANDLED = frozenset(
    {
        "model",
        "input",
        "system_instruction",
        "generation_config",
        "tools",
        "store",
        "stream",
        "response_format",
        "response_mime_type",
    }
)
_GEN_HANDLED = frozenset(
    {
        "max_output_tokens",
        "temperature",
        "top_p",
        "stop_sequences",
        "thinking_level",
        "thinking_summaries",
        "tool_choice",
    }
)


def parse_request(body: dict[str, Any], meta: RequestMeta) -> ChatRequest:
    body = expect_dict(body, "body")
    extras: dict[str, Any] = {}
    model = get_str(body, "model", "model")
    agent = get_str(body, "agent", "agent")
    if not model and not agent:
        raise invalid("model: field required", param="model")
    req = ChatRequest(model=model or agent or "", dialect=DIALECT)
    stream = get_bool(body, "stream", "stream")
    req.stream = meta.stream if meta.stream is not None else bool(stream)
    store = get_bool(body, "store", "store")
    req.store = True if store is None else store
    req.store_here = True  # the gateway keeps stored interactions itself (gateway/relay/stateful.py)
    # Resolved by the stateful layer (gateway/relay/stateful.py) from the store.
    req.previous_id = get_str(body, "previous_interaction_id", "previous_interaction_id")
    req.background = bool(get_bool(body, "background", "background"))

    if "input" not in body or body["input"] is None:
        if not (body.get("previous_interaction_id") or body.get("continuation_token")):
            raise invalid("input: field required", param="input")
    else:
        req.messages = parse_input(body["input"])

    system = body.get("system_instruction")
    if system is not None:
        if not isinstance(system, str):
            raise invalid(
                f"system_instruction: expected a string, got {type(system).__name__}", param="system_instruction"
            )
        if system:
            req.system = [TextPart(system)]

    for i, raw in enumerate(get_list(body, "tools", "tools")):
        tool = expect_dict(raw, f"tools[{i}]")
        typ = get_str(tool, "type", f"tools[{i}].type", required=True)
        if typ == "function":
            name = get_str(tool, "name", f"tools[{i}].name", required=True)
            params = get_dict(tool, "parameters", f"tools[{i}].parameters")
            req.tools.append(
                Tool(
                    name=name or "",
                    description=get_str(tool, "description", f"tools[{i}].description"),
                    parameters=params if params is not None else {"type": "object", "properties": {}},
                )
            )
        else:
            warn_unknown(DIALECT, f"built-in tool {typ!r} (kept only for a gemini-interactions upstream)")
            extras.setdefault("tools", []).append(tool)

    gen = get_dict(body, "generation_config", "generation_config")
    if gen is not None:
        _generation_config(gen, req, extras)

    _response_format(body, req, extras)

    for key in _PASSTHROUGH:
        if body.get(key) is not None:
            extras[key] = body[key]
    for key, value in body.items():
        if key not in _HANDLED and key not in _PASSTHROUGH:
            warn_unknown(DIALECT, f"request field {key!r}")
            extras[key] = value
    if extras:
        req.extras[DIALECT] = extras
    return req


# --------------------------------------------------------------------------- generation_config


def _generation_config(gen: dict[str, Any], req: ChatRequest, extras: dict[str, Any]) -> None:
    p = "generation_config"
    req.max_tokens = get_int(gen, "max_output_tokens", f"{p}.max_output_tokens", minimum=1)
    req.temperature = get_float(gen, "temperature", f"{p}.temperature")
    req.top_p = get_float(gen, "top_p", f"{p}.top_p")
    stops = get_list(gen, "stop_sequences", f"{p}.stop_sequences")
    if not all(isinstance(s, str) for s in stops):
        raise invalid(f"{p}.stop_sequences: expected an array of strings", param=f"{p}.stop_sequences")
    req.stop = list(stops)
    level = get_str(gen, "thinking_level", f"{p}.thinking_level")
    summaries = get_str(gen, "thinking_summaries", f"{p}.thinking_summaries")
    if level is not None and level not in EFFORTS:
        raise invalid(f"{p}.thinking_level: must be one of {', '.join(EFFORTS)}", param=f"{p}.thinking_level")
    if summaries is not None and summaries not in ("auto", "none"):
        raise invalid(f"{p}.thinking_summaries: must be 'auto' or 'none'", param=f"{p}.thinking_summaries")
    if level is not None or summaries is not None:
        req.thinking = Thinking(effort=level, include_thoughts=None if summaries is None else summaries == "auto")
    if gen.get("tool_choice") is not None:
        req.tool_choice = _tool_choice(gen["tool_choice"], f"{p}.tool_choice")
    rest = {k: v for k, v in gen.items() if k not in _GEN_HANDLED and v is not None}
    if rest:
        if "seed" in rest:
            get_int(gen, "seed", f"{p}.seed")
        extras["generation_config"] = rest  # seed, image_config, speech_config …: no IR slot


_CHOICE_MODES: dict[str, ToolMode] = {"auto": "auto", "any": "required", "none": "none", "validated": "auto"}


def _tool_choice(value: Any, path: str) -> ToolChoice:
    if isinstance(value, str):
        mode = _CHOICE_MODES.get(value)
        if mode is None:
            raise invalid(f"{path}: must be auto, any, none or validated", param=path)
        return ToolChoice(mode)
    cfg = expect_dict(value, path)
    allowed = get_dict(cfg, "allowed_tools", f"{path}.allowed_tools")
    if allowed is None:
        return ToolChoice("auto")
    names = get_list(allowed, "tools", f"{path}.allowed_tools.tools")
    if not all(isinstance(n, str) for n in names):
        raise invalid(f"{path}.allowed_tools.tools: expected an array of strings", param=f"{path}.allowed_tools.tools")
    wanted = get_str(allowed, "mode", f"{path}.allowed_tools.mode") or "auto"
    if wanted == "none":
        return ToolChoice("none")
    if wanted == "any" and len(names) == 1:
        return ToolChoice("tool", name=names[0])
    return ToolChoice("required" if wanted == "any" else "auto", allowed=list(names) or None)


def _response_format(body: dict[str, Any], req: ChatRequest, extras: dict[str, Any]) -> None:
    mime = get_str(body, "response_mime_type", "response_mime_type")
    rf = body.get("response_format")
    if rf is None:
        if mime == "application/json":
            req.response_format = {"type": "json"}
        elif mime is not None:
            extras["response_mime_type"] = mime
        return
    if isinstance(rf, dict) and rf.get("type") == "text":
        schema = rf.get("schema")
        if schema is not None and not isinstance(schema, dict):
            raise invalid("response_format.schema: expected an object", param="response_format.schema")
        if schema is not None:
            req.response_format = {"type": "json_schema", "schema": schema}
        elif (rf.get("mime_type") or mime) == "application/json":
            req.response_format = {"type": "json"}
        return
    if isinstance(rf, dict) and rf.get("type") not in ("audio", "image", "video"):
        req.response_format = {"type": "json_schema", "schema": rf}  # the older form: the schema itself
        return
    if not isinstance(rf, (dict, list)):
        raise invalid(f"response_format: expected an object, got {type(rf).__name__}", param="response_format")
    warn_unknown(DIALECT, "non-text response_format (kept only for a gemini-interactions upstream)")
    extras["response_format"] = rf
    if mime is not None:
        extras["response_mime_type"] = mime


# --------------------------------------------------------------------------- input


def parse_input(value: Any) -> list[Message]:
    if isinstance(value, str):
        return [Message("user", [TextPart(value)])]
    if isinstance(value, dict):
        typ = value.get("type")
        if typ in CONTENT_TYPES:
            return [Message("user", [parse_content(value, "input")])]
        return parse_steps([value], "input")
    if not isinstance(value, list):
        raise invalid(f"input: expected a string, an object or an array, got {type(value).__name__}", param="input")
    if not value:
        raise invalid("input: must not be empty", param="input")
    if all(isinstance(v, dict) and v.get("type") in CONTENT_TYPES for v in value):
        return [Message("user", [parse_content(v, f"input[{i}]") for i, v in enumerate(value)])]
    return parse_steps(value, "input")


def parse_content(block: Any, path: str) -> TextPart | ImagePart | FilePart:
    block = expect_dict(block, path)
    typ = get_str(block, "type", f"{path}.type", required=True)
    if typ == "text":
        return TextPart(get_str(block, "text", f"{path}.text", required=True) or "")
    if typ not in CONTENT_TYPES:
        raise invalid(f"{path}.type: unsupported content type {typ!r}", param=f"{path}.type")
    data = get_str(block, "data", f"{path}.data")
    uri = get_str(block, "uri", f"{path}.uri")
    mime = get_str(block, "mime_type", f"{path}.mime_type")
    if not data and not uri:
        raise invalid(f"{path}: {typ} content needs data or uri", param=path)
    if typ == "image":
        return ImagePart(media_type=mime, data=data, url=uri)
    return FilePart(media_type=mime, data=data, url=uri)


def parse_steps(steps: list[Any], path: str) -> list[Message]:
    messages: list[Message] = []

    def add(role: Role, parts: list[Part]) -> None:
        if messages and messages[-1].role == role:
            messages[-1].content.extend(parts)
        else:
            messages.append(Message(role, list(parts)))

    for i, raw in enumerate(steps):
        p = f"{path}[{i}]"
        step = expect_dict(raw, p)
        typ = get_str(step, "type", f"{p}.type", required=True)
        if typ == "user_input":
            add(
                "user",
                [
                    parse_content(c, f"{p}.content[{j}]")
                    for j, c in enumerate(get_list(step, "content", f"{p}.content"))
                ],
            )
        elif typ == "model_output":
            add(
                "assistant",
                [
                    parse_content(c, f"{p}.content[{j}]")
                    for j, c in enumerate(get_list(step, "content", f"{p}.content"))
                ],
            )
        elif typ == "thought":
            add("assistant", [_thought(step, p)])
        elif typ == "function_call":
            name = get_str(step, "name", f"{p}.name", required=True) or ""
            args = get_dict(step, "arguments", f"{p}.arguments")
            call_id = get_str(step, "id", f"{p}.id") or new_id("call_", 8)
            add("assistant", [ToolCallPart(call_id, name, orjson.dumps(args or {}).decode())])
        elif typ == "function_result":
            add("user", [_function_result(step, p)])
        elif typ in CONTENT_TYPES:
            add("user", [parse_content(step, p)])
        else:  # a server tool's step (google_search_call / _result …): verbatim for its own dialect
            add("assistant", [OpaquePart(step, DIALECT)])
    return messages


def _thought(step: dict[str, Any], p: str) -> ThinkingPart:
    texts = []
    for j, s in enumerate(get_list(step, "summary", f"{p}.summary")):
        s = expect_dict(s, f"{p}.summary[{j}]")
        text = s.get("text")
        if isinstance(text, str):
            texts.append(text)
    sig = get_str(step, "signature", f"{p}.signature")
    part = ThinkingPart(text="\n\n".join(t for t in texts if t))
    if sig:
        part.origin, part.signature = signatures.unpack(sig, DIALECT)
    return part


def _function_result(step: dict[str, Any], p: str) -> ToolResultPart:
    call_id = get_str(step, "call_id", f"{p}.call_id", required=True) or ""
    if "result" not in step or step["result"] is None:
        raise invalid(f"{p}.result: field required", param=f"{p}.result")
    result = step["result"]
    content: list[TextPart | ImagePart | FilePart]
    if isinstance(result, str):
        content = [TextPart(result)]
    elif isinstance(result, list):
        content = [parse_content(c, f"{p}.result[{j}]") for j, c in enumerate(result)]
    elif isinstance(result, dict):
        inner = result.get("content")
        if isinstance(inner, list) and len(result) == 1:
            content = [parse_content(c, f"{p}.result.content[{j}]") for j, c in enumerate(inner)]
        else:
            content = [TextPart(orjson.dumps(result).decode())]
    else:
        content = [TextPart(orjson.dumps(result).decode())]
    return ToolResultPart(
        tool_call_id=call_id,
        content=content,
        is_error=bool(get_bool(step, "is_error", f"{p}.is_error")),
        name=get_str(step, "name", f"{p}.name"),
    )
