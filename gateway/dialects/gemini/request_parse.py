"""Gemini ``generateContent`` / ``streamGenerateContent`` request JSON → ``ChatRequest``.

The model comes from the URL (``/v1beta/models/{model}:…``), never from the body. Function calls
may carry no ``id`` (older models, most SDK users): they get ``call_<n>`` ids in order, and a
``functionResponse`` without an id takes the id of the earliest unanswered call of the same name,
so the IR always pairs results with calls (other dialects require that).
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
    ToolResultPart,
)

from .schema import to_json_schema
from .sigs import from_caller

DIALECT = "gemini"

_TOP_KEYS = frozenset({"contents", "systemInstruction", "tools", "toolConfig", "generationConfig", "model"})
_GEN_KEYS = frozenset(
    {
        "maxOutputTokens",
        "temperature",
        "topP",
        "topK",
        "stopSequences",
        "candidateCount",
        "responseMimeType",
        "responseSchema",
        "responseJsonSchema",
        "thinkingConfig",
    }
)
_ROLES: dict[str, Role] = {"user": "user", "model": "assistant", "function": "user", "tool": "user"}


def _camel(obj: Any) -> Any:
    """Shallow snake_case → camelCase of one structural level (the API and the SDK accept both:
    google-genai itself sends ``thinking_config`` contents and ``parameters_json_schema`` in
    snake_case). Never applied to free-form values (args, response, schemas' property names)."""
    if not isinstance(obj, dict) or not any("_" in k for k in obj):
        return obj
    out = {}
    for key, value in obj.items():
        if "_" in key and not key.startswith("_"):
            head, *rest = key.split("_")
            key = head + "".join(w[:1].upper() + w[1:] for w in rest)
        out[key] = value
    return out


class _Ids:
    """Deterministic ids for calls without one, and recovery of ids for responses by name."""

    def __init__(self) -> None:
        self.n = 0
        self.open: list[tuple[str, str]] = []  # (name, id) of calls not answered yet

    def call(self, name: str, cid: str | None) -> str:
        self.n += 1
        cid = cid or f"call_{self.n}"
        self.open.append((name, cid))
        return cid

    def response(self, name: str | None, cid: str | None) -> str:
        for i, (n, c) in enumerate(self.open):
            if (cid and c == cid) or (not cid and n == name):
                del self.open[i]
                return c
        if cid:
            return cid
        self.n += 1
        return f"call_{self.n}"


def parse_request(body: dict[str, Any], meta: RequestMeta) -> ChatRequest:
    model = meta.path_model or ""
    if model.startswith("models/"):
        model = model[len("models/") :]
    if not model:
        raise invalid("model: missing in the URL (/v1beta/models/{model}:generateContent)", param="model")
    body = _camel(body)
    req = ChatRequest(model=model, dialect=DIALECT, stream=bool(meta.stream))
    if req.stream and meta.query.get("alt", "").lower() != "sse":
        req.stream_framing = "json-array"  # the REST default: one JSON array, element by element
    extras: dict[str, Any] = {}

    ids = _Ids()
    contents = get_list(body, "contents", "contents", required=True)
    if not contents:
        raise invalid("contents: must not be empty", param="contents")
    for i, item in enumerate(contents):
        path = f"contents[{i}]"
        content = _camel(expect_dict(item, path))
        role = get_str(content, "role", f"{path}.role") or "user"
        if role not in _ROLES:
            raise invalid(f"{path}.role: must be 'user' or 'model', got {role!r}", param=f"{path}.role")
        parts = get_list(content, "parts", f"{path}.parts", required=True)
        out: list[Part] = []
        for j, raw in enumerate(parts):
            _part(_camel(expect_dict(raw, f"{path}.parts[{j}]")), f"{path}.parts[{j}]", out, ids)
        req.messages.append(Message(_ROLES[role], out))

    system = body.get("systemInstruction")
    if isinstance(system, str):
        req.system = [TextPart(system)]
    elif system is not None:
        sys_obj = _camel(expect_dict(system, "systemInstruction"))
        for j, raw in enumerate(get_list(sys_obj, "parts", "systemInstruction.parts")):
            text = get_str(
                expect_dict(raw, f"systemInstruction.parts[{j}]"), "text", f"systemInstruction.parts[{j}].text"
            )
            if text:
                req.system.append(TextPart(text))

    _tools(body, req, extras)
    _tool_config(body, req, extras)
    _generation_config(body, req, extras)

    for key, value in body.items():
        if key not in _TOP_KEYS:
            extras[key] = value
            if key not in ("safetySettings", "cachedContent", "labels"):
                warn_unknown(DIALECT, f"request field {key}")
    if extras:
        req.extras[DIALECT] = extras
    return req


def _add_signed(out: list[Part], thinking: ThinkingPart) -> None:
    """A signature on a non-thought part signs the thought text right before it, when there is one
    (our encoder puts a thinking block's signature on the next part, as Gemini does): keep text and
    signature together, since some providers (Anthropic) sign the text itself."""
    if out and isinstance(out[-1], ThinkingPart) and out[-1].signature is None and out[-1].redacted_data is None:
        out[-1].signature, out[-1].origin = thinking.signature, thinking.origin
    else:
        out.append(thinking)


def _part(part: dict[str, Any], path: str, out: list[Part], ids: _Ids) -> None:
    sig = get_str(part, "thoughtSignature", f"{path}.thoughtSignature")
    thinking: ThinkingPart | None = None
    if sig:
        origin, raw = from_caller(sig)
        thinking = ThinkingPart(signature=raw, origin=origin)
    if "text" in part:
        text = get_str(part, "text", f"{path}.text") or ""
        if get_bool(part, "thought", f"{path}.thought"):
            previous = out[-1] if out else None
            if isinstance(previous, ThinkingPart) and previous.signature is None and previous.redacted_data is None:
                # consecutive thought parts are one thought streamed in pieces: keep them together
                previous.text += text
                if thinking is not None:
                    previous.signature, previous.origin = thinking.signature, thinking.origin
            elif thinking is not None:
                thinking.text = text
                out.append(thinking)
            else:
                out.append(ThinkingPart(text=text))
            return
        if thinking is not None:
            _add_signed(out, thinking)
        if text:
            out.append(TextPart(text))
        return
    if thinking is not None:
        _add_signed(out, thinking)
    if "inlineData" in part:
        blob = _camel(get_dict(part, "inlineData", f"{path}.inlineData", required=True) or {})
        mime = get_str(blob, "mimeType", f"{path}.inlineData.mimeType", required=True) or ""
        data = get_str(blob, "data", f"{path}.inlineData.data", required=True)
        out.append(ImagePart(mime, data) if mime.startswith("image/") else FilePart(mime, data))
    elif "fileData" in part:
        fd = _camel(get_dict(part, "fileData", f"{path}.fileData", required=True) or {})
        mime = get_str(fd, "mimeType", f"{path}.fileData.mimeType") or ""
        uri = get_str(fd, "fileUri", f"{path}.fileData.fileUri", required=True)
        if mime.startswith("image/"):
            out.append(ImagePart(mime, url=uri))
        else:
            out.append(
                FilePart(mime or None, url=uri, filename=get_str(fd, "displayName", f"{path}.fileData.displayName"))
            )
    elif "functionCall" in part:
        fc = _camel(get_dict(part, "functionCall", f"{path}.functionCall", required=True) or {})
        name = get_str(fc, "name", f"{path}.functionCall.name", required=True) or ""
        args = get_dict(fc, "args", f"{path}.functionCall.args") or {}
        cid = ids.call(name, get_str(fc, "id", f"{path}.functionCall.id"))
        out.append(ToolCallPart(cid, name, orjson.dumps(args).decode()))
    elif "functionResponse" in part:
        fr = _camel(get_dict(part, "functionResponse", f"{path}.functionResponse", required=True) or {})
        name = get_str(fr, "name", f"{path}.functionResponse.name", required=True) or ""
        response = fr.get("response")
        if response is None:
            response = {}
        cid = ids.response(name, get_str(fr, "id", f"{path}.functionResponse.id"))
        text = orjson.dumps(response).decode()
        is_error = isinstance(response, dict) and set(response) == {"error"}
        content: list[TextPart | ImagePart | FilePart] = [TextPart(text)]
        for k, sub in enumerate(get_list(fr, "parts", f"{path}.functionResponse.parts")):
            media: list[Part] = []
            _part(
                _camel(expect_dict(sub, f"{path}.functionResponse.parts[{k}]")),
                f"{path}.functionResponse.parts[{k}]",
                media,
                ids,
            )
            content.extend(m for m in media if isinstance(m, (ImagePart, FilePart)))
        out.append(ToolResultPart(cid, content, is_error=is_error, name=name))
    else:
        if any(k not in ("thought", "thoughtSignature") for k in part):
            # executableCode, codeExecutionResult … have no IR slot: verbatim for a Gemini upstream,
            # left out (and reported) for others (gateway/dialects/items.py)
            out.append(OpaquePart(part, DIALECT))


def _tools(body: dict[str, Any], req: ChatRequest, extras: dict[str, Any]) -> None:
    other: list[Any] = []
    for i, raw in enumerate(get_list(body, "tools", "tools")):
        tool = _camel(expect_dict(raw, f"tools[{i}]"))
        for key, value in tool.items():
            if key != "functionDeclarations":
                other.append({key: value})
                warn_unknown(DIALECT, f"tool kind {key} (passed through to Gemini upstreams only)")
        for j, decl_raw in enumerate(get_list(tool, "functionDeclarations", f"tools[{i}].functionDeclarations")):
            path = f"tools[{i}].functionDeclarations[{j}]"
            decl = _camel(expect_dict(decl_raw, path))
            name = get_str(decl, "name", f"{path}.name", required=True) or ""
            if "parametersJsonSchema" in decl:
                params = get_dict(decl, "parametersJsonSchema", f"{path}.parametersJsonSchema") or {}
            else:
                params = to_json_schema(
                    get_dict(decl, "parameters", f"{path}.parameters") or {"type": "object", "properties": {}}
                )
            req.tools.append(Tool(name, get_str(decl, "description", f"{path}.description"), params))
    if other:
        extras["tools"] = other


def _tool_config(body: dict[str, Any], req: ChatRequest, extras: dict[str, Any]) -> None:
    cfg = _camel(get_dict(body, "toolConfig", "toolConfig"))
    if not cfg:
        return
    fcc = _camel(get_dict(cfg, "functionCallingConfig", "toolConfig.functionCallingConfig"))
    for key in cfg:
        if key != "functionCallingConfig":
            extras.setdefault("toolConfig", {})[key] = cfg[key]
    if not fcc:
        return
    mode = (get_str(fcc, "mode", "toolConfig.functionCallingConfig.mode") or "AUTO").upper()
    names = get_list(fcc, "allowedFunctionNames", "toolConfig.functionCallingConfig.allowedFunctionNames")
    if not all(isinstance(n, str) for n in names):
        raise invalid("toolConfig.functionCallingConfig.allowedFunctionNames: expected strings", param="toolConfig")
    allowed = list(names) or None
    if mode == "ANY":
        if allowed and len(allowed) == 1:
            req.tool_choice = ToolChoice("tool", name=allowed[0])
        else:
            req.tool_choice = ToolChoice("required", allowed=allowed)
    elif mode == "NONE":
        req.tool_choice = ToolChoice("none")
    elif mode in ("AUTO", "VALIDATED", "MODE_UNSPECIFIED"):
        req.tool_choice = ToolChoice("auto", allowed=allowed)
        if mode == "VALIDATED":
            extras["functionCallingMode"] = "VALIDATED"
    else:
        raise invalid(f"toolConfig.functionCallingConfig.mode: unknown mode {mode!r}", param="toolConfig")


def _generation_config(body: dict[str, Any], req: ChatRequest, extras: dict[str, Any]) -> None:
    gc = _camel(get_dict(body, "generationConfig", "generationConfig"))
    if not gc:
        return
    p = "generationConfig."
    req.max_tokens = get_int(gc, "maxOutputTokens", p + "maxOutputTokens", minimum=1)
    req.temperature = get_float(gc, "temperature", p + "temperature")
    req.top_p = get_float(gc, "topP", p + "topP")
    top_k = get_float(gc, "topK", p + "topK")
    req.top_k = int(top_k) if top_k is not None else None
    stops = get_list(gc, "stopSequences", p + "stopSequences")
    if not all(isinstance(s, str) for s in stops):
        raise invalid(p + "stopSequences: expected an array of strings", param=p + "stopSequences")
    req.stop = list(stops)
    count = get_int(gc, "candidateCount", p + "candidateCount")
    if count is not None and count > 1:
        raise invalid(p + "candidateCount: only 1 candidate is supported by this gateway", param=p + "candidateCount")
    mime = get_str(gc, "responseMimeType", p + "responseMimeType")
    if "responseJsonSchema" in gc:
        schema = get_dict(gc, "responseJsonSchema", p + "responseJsonSchema")
        req.response_format = {"type": "json_schema", "schema": schema}
    elif "responseSchema" in gc:
        schema = to_json_schema(get_dict(gc, "responseSchema", p + "responseSchema"))
        req.response_format = {"type": "json_schema", "schema": schema}
    elif mime == "application/json":
        req.response_format = {"type": "json"}
    elif mime and mime != "text/plain":
        extras.setdefault("generationConfig", {})["responseMimeType"] = mime
    tc = _camel(get_dict(gc, "thinkingConfig", p + "thinkingConfig"))
    if tc is not None:
        th = Thinking()
        th.include_thoughts = get_bool(tc, "includeThoughts", p + "thinkingConfig.includeThoughts")
        budget = get_int(tc, "thinkingBudget", p + "thinkingConfig.thinkingBudget", minimum=-1)
        if budget == 0:
            th.enabled = False
        elif budget == -1:
            th.enabled = True
        elif budget is not None:
            th.enabled, th.budget_tokens = True, budget
        level = get_str(tc, "thinkingLevel", p + "thinkingConfig.thinkingLevel")
        if level and level.upper() != "THINKING_LEVEL_UNSPECIFIED":
            th.effort = level.lower()
            th.enabled = True if th.enabled is None else th.enabled
        req.thinking = th
    for key, value in gc.items():
        if key not in _GEN_KEYS:
            extras.setdefault("generationConfig", {})[key] = value
