"""``ChatRequest`` → a Gemini ``streamGenerateContent?alt=sse`` call.

Notes on choices made here:

* Tool schemas go out as ``parameters`` converted by ``schema.convert_for_gemini`` (OpenAPI
  subset) by default: every Gemini model and Vertex deployment accepts it, while
  ``parametersJsonSchema`` (raw JSON Schema) is newer and model dependent. Set
  ``BuildOptions.gemini_parameters_json_schema = True`` (or call ``build_call(...,
  json_schema=True)``) to send the caller's schema untouched in ``parametersJsonSchema``.
* Gemini insists on alternating roles and on a ``functionResponse.name``: consecutive turns of
  one role are merged, and a result without a name takes it from the matching earlier call.
* ``functionResponse.response`` must be an object: JSON-object result text is sent as is, other
  text as ``{"result": text}`` (``{"error": text}`` for an error result).
* A thinking signature from Gemini goes back as ``thoughtSignature`` on the NEXT part of the same
  model turn (the part it came with); thought text itself is never sent back.
"""

from __future__ import annotations

import base64
import mimetypes
from typing import Any
from urllib.parse import quote

from gateway.dialects.base import BuildOptions, UpstreamCall
from gateway.dialects.common import arguments_object, loads_object, log
from gateway.dialects.thinking import budget_for_effort
from gateway.errors import GatewayError
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

from .schema import convert_for_gemini

DIALECT = "gemini"


def build_request(req: ChatRequest, upstream_model: str, options: BuildOptions) -> UpstreamCall:
    call = build_call(req, upstream_model, json_schema=options.gemini_parameters_json_schema)
    if not options.stream:  # a whole caller gets a whole upstream call
        call.path = call.path.replace(":streamGenerateContent", ":generateContent")
        call.params = {}
    return call


def model_path(upstream_model: str) -> str:
    """The model as it goes into the upstream URL path, ``/v1beta/models/{here}:method``.

    The name may come from the caller (``provider/model`` addressing, glob routes), so it must
    not steer the call elsewhere on the provider with the gateway's key: ``?`` and ``#`` are
    percent-encoded and ``.`` / ``..`` segments refused. ``/`` stays (``tunedModels/x``).
    """
    model = upstream_model[len("models/") :] if upstream_model.startswith("models/") else upstream_model
    if not model or any(seg in ("", ".", "..") for seg in model.split("/")):
        raise GatewayError(
            "invalid_request", f"model name {upstream_model!r} cannot be used in a Gemini URL", 400, param="model"
        )
    return quote(model, safe="/-._~:@!$&'()*+,;=")


def build_call(req: ChatRequest, upstream_model: str, *, json_schema: bool = False) -> UpstreamCall:
    model = model_path(upstream_model)
    body: dict[str, Any] = {}
    system_texts = [p.text for p in req.system if p.text]
    contents: list[dict[str, Any]] = []
    names: dict[str, str] = {}  # tool call id -> name, for functionResponse.name
    for message in req.messages:
        if message.role == "system":
            system_texts.extend(p.text for p in message.content if isinstance(p, TextPart) and p.text)
            continue
        role = "model" if message.role == "assistant" else "user"
        parts = _parts(message, role, names)
        if not parts:
            continue
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})
    body["contents"] = contents
    if system_texts:
        body["systemInstruction"] = {"parts": [{"text": "\n\n".join(system_texts)}]}

    if req.tools:
        decls = []
        for tool in req.tools:
            decl: dict[str, Any] = {"name": tool.name}
            if tool.description:
                decl["description"] = tool.description
            if json_schema:
                decl["parametersJsonSchema"] = tool.parameters
            else:
                params = convert_for_gemini(tool.parameters)
                if params.get("properties") or params.get("type") not in (None, "object"):
                    decl["parameters"] = params  # Gemini rejects an OBJECT with empty properties
            decls.append(decl)
        body["tools"] = [{"functionDeclarations": decls}]
    tool_config = _tool_config(req)
    if tool_config:
        body["toolConfig"] = tool_config

    gen: dict[str, Any] = {}
    if req.max_tokens is not None:
        gen["maxOutputTokens"] = req.max_tokens
    if req.temperature is not None:
        gen["temperature"] = req.temperature
    if req.top_p is not None:
        gen["topP"] = req.top_p
    if req.top_k is not None:
        gen["topK"] = req.top_k
    if req.stop:
        gen["stopSequences"] = list(req.stop)
    rf = req.response_format
    if rf:
        if rf.get("type") in ("json_schema", "json", "json_object"):
            gen["responseMimeType"] = "application/json"
            if isinstance(rf.get("schema"), dict):
                gen["responseJsonSchema"] = rf["schema"]
    thinking = _thinking(req, model)
    if thinking:
        gen["thinkingConfig"] = thinking

    extras = req.extras.get(DIALECT) or {}
    for key, value in extras.items():
        if key == "generationConfig" and isinstance(value, dict):
            for k, v in value.items():
                gen.setdefault(k, v)
        elif key == "tools" and isinstance(value, list):
            body.setdefault("tools", []).extend(value)
        elif key == "toolConfig" and isinstance(value, dict):
            body.setdefault("toolConfig", {}).update(value)
        elif key == "functionCallingMode":
            fcc = body.setdefault("toolConfig", {}).setdefault("functionCallingConfig", {})
            if fcc.get("mode", "AUTO") == "AUTO":
                fcc["mode"] = value
        elif key not in body:
            body[key] = value
    if gen:
        body["generationConfig"] = gen
    return UpstreamCall(path=f"/v1beta/models/{model}:streamGenerateContent", body=body, params={"alt": "sse"})


def _parts(message: Message, role: str, names: dict[str, str]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    sig: str | None = None  # a Gemini signature waiting for the next part of this model turn
    for part in message.content:
        out: dict[str, Any] | None = None
        extra: list[dict[str, Any]] = []
        if isinstance(part, TextPart):
            if part.text:
                out = {"text": part.text}
        elif isinstance(part, ThinkingPart):
            if role == "model" and part.origin == DIALECT and part.signature:
                if sig is not None:
                    parts.append({"text": "", "thoughtSignature": sig})
                sig = part.signature
            continue
        elif isinstance(part, ToolCallPart):
            names[part.id] = part.name
            fc: dict[str, Any] = {"name": part.name, "args": arguments_object(part.arguments)}
            out = {"functionCall": fc if _generated(part.id) else {"id": part.id, **fc}}
        elif isinstance(part, ToolResultPart):
            out, extra = _tool_result(part, names)
        elif isinstance(part, (ImagePart, FilePart)):
            out = _media(part)
        elif isinstance(part, OpaquePart) and part.origin == DIALECT:  # a part of its own, verbatim
            out = dict(part.item)
        if out is None:
            continue
        if sig is not None:
            out["thoughtSignature"] = sig
            sig = None
        parts.append(out)
        parts.extend(extra)
    if sig is not None:
        parts.append({"text": "", "thoughtSignature": sig})
    return parts


def _tool_result(part: ToolResultPart, names: dict[str, str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    name = part.name or names.get(part.tool_call_id)
    if not name:
        log.warning("gemini: tool result %s has no matching call; name left as its id", part.tool_call_id)
        name = part.tool_call_id
    text = "".join(p.text for p in part.content if isinstance(p, TextPart))
    response = loads_object(text) if text.strip().startswith("{") else None
    if response is None:
        response = {"error": text} if part.is_error else {"result": text}
    media = [m for p in part.content if isinstance(p, (ImagePart, FilePart)) and (m := _media(p)) is not None]
    fr: dict[str, Any] = {"name": name, "response": response}
    if not _generated(part.tool_call_id):
        fr = {"id": part.tool_call_id, **fr}
    return {"functionResponse": fr}, media


def _generated(cid: str) -> bool:
    """An id the parser made up for an id-less Gemini call (``call_<n>``): not sent upstream."""
    return not cid or (cid.startswith("call_") and cid[5:].isdigit())


def _media(part: ImagePart | FilePart) -> dict[str, Any] | None:
    default = "image/jpeg" if isinstance(part, ImagePart) else "application/octet-stream"
    if part.data:
        return {"inlineData": {"mimeType": part.media_type or default, "data": part.data}}
    url = part.url
    if not url:
        return None
    if url.startswith("data:"):
        header, _, payload = url.partition(",")
        mime = header[5:].split(";")[0] or part.media_type or default
        if ";base64" not in header:
            payload = base64.b64encode(payload.encode()).decode()
        return {"inlineData": {"mimeType": mime, "data": payload}}
    mime = part.media_type or mimetypes.guess_type(url.split("?")[0])[0] or default
    return {"fileData": {"mimeType": mime, "fileUri": url}}


def _tool_config(req: ChatRequest) -> dict[str, Any] | None:
    tc = req.tool_choice
    if tc is None:
        return None
    if tc.mode == "none":
        fcc: dict[str, Any] = {"mode": "NONE"}
    elif tc.mode == "tool" and tc.name:
        fcc = {"mode": "ANY", "allowedFunctionNames": [tc.name]}
    elif tc.mode == "required":
        fcc = {"mode": "ANY"}
        if tc.allowed:
            fcc["allowedFunctionNames"] = list(tc.allowed)
    else:
        fcc = {"mode": "AUTO"}
        if tc.allowed:
            # allowedFunctionNames is only valid with ANY/VALIDATED; VALIDATED keeps "may answer in text".
            fcc = {"mode": "VALIDATED", "allowedFunctionNames": list(tc.allowed)}
    return {"functionCallingConfig": fcc}


def _thinking(req: ChatRequest, model: str) -> dict[str, Any] | None:
    """thinkingConfig: budget from budget_tokens, else from effort (``thinkingLevel`` on Gemini 3)."""
    th = req.thinking
    if th is None:
        return None
    out: dict[str, Any] = {}
    if th.enabled is False or th.effort == "none":
        out["thinkingBudget"] = 0
        return out
    if th.include_thoughts is not None:
        out["includeThoughts"] = th.include_thoughts
    elif th.enabled:
        out["includeThoughts"] = True
    if th.budget_tokens is not None:
        out["thinkingBudget"] = th.budget_tokens
    elif th.effort:
        if "gemini-3" in model:
            out["thinkingLevel"] = {"xhigh": "high"}.get(th.effort, th.effort)
        else:
            out["thinkingBudget"] = budget_for_effort(th.effort)
    elif th.enabled and "gemini-3" not in model:
        out["thinkingBudget"] = -1  # dynamic
    return out or None
