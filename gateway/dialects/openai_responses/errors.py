"""OpenAI error bodies ``{"error": {"message", "type", "param", "code"}}`` <-> ``GatewayError``.

The same shape serves HTTP error bodies and the in-stream ``error`` event / ``response.failed``
``error`` object (which carries only ``code`` and ``message``).
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.dialects.openai_chat.errors import LASTING_CODES, is_lasting
from gateway.dialects.openai_chat.ratelimit import REFUSAL_CODES
from gateway.errors import GatewayError, kind_for_status

DIALECT = "openai-responses"
_SAME_FAMILY = ("openai-responses", "openai-chat")

# In-stream error codes (``response.failed`` / ``error``) -> (kind, HTTP status).
_CODE_KIND: dict[str, tuple[str, int]] = {
    "server_error": ("api_error", 500),
    "rate_limit_exceeded": ("rate_limit", 429),
    "insufficient_quota": ("rate_limit", 429),
    "invalid_prompt": ("invalid_request", 400),
    "invalid_request_error": ("invalid_request", 400),
    "context_length_exceeded": ("invalid_request", 400),
    "vector_store_timeout": ("timeout", 504),
    "overloaded": ("overloaded", 503),
    "content_filter": ("invalid_request", 400),  # Azure's prompt filter
}

# kind -> (type, code) shown to an OpenAI caller when the error did not come from OpenAI.
_KIND_TYPE: dict[str, tuple[str, str | None]] = {
    "invalid_request": ("invalid_request_error", None),
    "guardrail_blocked": ("invalid_request_error", "guardrail_blocked"),
    "authentication": ("invalid_request_error", "invalid_api_key"),
    "permission": ("invalid_request_error", "permission_denied"),
    "not_found": ("invalid_request_error", "not_found"),
    "request_too_large": ("invalid_request_error", "request_too_large"),
    "unsupported_media_type": ("invalid_request_error", "unsupported_media_type"),
    "rate_limit": ("requests", "rate_limit_exceeded"),
    "api_error": ("server_error", None),
    "bad_gateway": ("server_error", "bad_gateway"),
    "overloaded": ("server_error", "overloaded"),
    "timeout": ("server_error", "timeout"),
    "truncated": ("server_error", "stream_truncated"),
    "cancelled": ("server_error", "cancelled"),
}


def kind_for_code(code: str | None) -> tuple[str, int]:
    """Kind and status of an in-stream error code (``server_error`` when unknown)."""
    if code and code.isdigit() and 400 <= int(code) < 600:  # Azure: the HTTP status as the code ("429")
        return kind_for_status(int(code)), int(code)
    return _CODE_KIND.get(code or "", ("api_error", 500))


def decode_error(status: int, body: bytes) -> GatewayError:
    """An upstream HTTP error body. Non-JSON bodies keep their text as the message."""
    message = ""
    raw: str | None = None
    param: str | None = None
    lasting = is_lasting(status, None, None)
    try:
        obj = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        obj = None
    err = obj.get("error") if isinstance(obj, dict) else None
    if isinstance(err, dict):
        message = str(err.get("message") or "")
        code, typ = err.get("code"), err.get("type")
        # Azure sends the HTTP status as a string code ("429"): a status, not a code
        raw = code if isinstance(code, str) and code and not code.isdigit() else typ if isinstance(typ, str) else None
        param = err.get("param") if isinstance(err.get("param"), str) else None
        lasting = is_lasting(status, typ if isinstance(typ, str) else None, code if isinstance(code, str) else None)
    elif isinstance(err, str):
        message = err
    if not message:
        message = body.decode("utf-8", "replace")[:2000] if body else f"upstream returned HTTP {status}"
    return GatewayError(kind_for_status(status), message, status, raw=raw, origin=DIALECT, param=param, lasting=lasting)


def lasting_code(code: str | None) -> bool:
    """Whether an in-stream error code (``response.failed`` / ``error``) cannot heal by waiting."""
    return code in LASTING_CODES


def error_type_code(kind: str, raw: str | None, origin: str | None) -> tuple[str, str | None]:
    """(type, code) for a caller: an OpenAI upstream's own code is kept verbatim."""
    typ, code = _KIND_TYPE.get(kind, ("server_error", None))
    if kind == "rate_limit" and raw in REFUSAL_CODES:  # which limit: requests, tokens, or a spent quota
        return REFUSAL_CODES[raw]
    if raw and origin in _SAME_FAMILY:
        code = raw
        if raw in ("server_error", "invalid_request_error"):
            typ = raw
    return typ, code


def error_body(message: str, typ: str, code: str | None, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": typ, "param": param, "code": code}}


def render_error(err: GatewayError) -> tuple[int, dict[str, Any]]:
    status = err.status
    if status == 529:  # Anthropic's overloaded status means nothing to OpenAI SDKs
        status = 503
    typ, code = error_type_code(err.kind, err.raw, err.origin)
    if err.kind == "not_found" and not (err.raw and err.origin in _SAME_FAMILY):
        # as OpenAI answers: a missing model has code model_not_found; a missing stored response
        # (``No response found with id …``) or URL has none
        code = "model_not_found" if err.param == "model" else None
    return status, error_body(err.message, typ, code, err.param)
