"""Interactions error bodies ``{"error": {"code": <string>, "message": <string>}}`` <-> ``GatewayError``.

The SDKs' schema has a *string* ``code`` (``resource_exhausted``, ``internal``, ``invalid_argument``,
``not_found`` …: the lower-cased gRPC status names; Google's streaming guide also shows
``gateway_timeout``). The same shape is the in-stream ``error`` event's ``error`` object. Whether
Google's HTTP errors use it or the generic ``{"error": {"code": 429, "message", "status":
"RESOURCE_EXHAUSTED"}}`` is uncertain (INTERACTIONS.md §5), so the decoder reads both.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.dialects.gemini.errors import error_reasons, is_lasting
from gateway.errors import GatewayError, kind_for_status

DIALECT = "gemini-interactions"

# string code -> (kind, HTTP status)
_CODE_KIND: dict[str, tuple[str, int]] = {
    "invalid_argument": ("invalid_request", 400),
    "failed_precondition": ("invalid_request", 400),
    "out_of_range": ("invalid_request", 400),
    "unauthenticated": ("authentication", 401),
    "permission_denied": ("permission", 403),
    "not_found": ("not_found", 404),
    "resource_exhausted": ("rate_limit", 429),
    "internal": ("api_error", 500),
    "unknown": ("api_error", 500),
    "unavailable": ("overloaded", 503),
    "deadline_exceeded": ("timeout", 504),
    "gateway_timeout": ("timeout", 504),
    "cancelled": ("cancelled", 499),
    "aborted": ("api_error", 500),
}

# kind -> the string code an Interactions caller is shown when the error did not come from this dialect.
_KIND_CODE: dict[str, str] = {
    "invalid_request": "invalid_argument",
    "guardrail_blocked": "invalid_argument",
    "authentication": "unauthenticated",
    "permission": "permission_denied",
    "not_found": "not_found",
    "request_too_large": "invalid_argument",
    "unsupported_media_type": "invalid_argument",
    "rate_limit": "resource_exhausted",
    "api_error": "internal",
    "bad_gateway": "unavailable",
    "overloaded": "unavailable",
    "timeout": "gateway_timeout",
    "truncated": "internal",
    "cancelled": "cancelled",
}


def kind_for_code(code: str | None) -> tuple[str, int]:
    """Kind and HTTP status of a string error code (``internal`` when unknown)."""
    return _CODE_KIND.get((code or "").lower(), ("api_error", 500))


def code_for(kind: str, raw: str | None, origin: str | None) -> str:
    """The string code a caller sees: this dialect's own code is kept verbatim."""
    if raw and origin == DIALECT:
        return raw
    return _KIND_CODE.get(kind, "internal")


def decode_error(status: int, body: bytes) -> GatewayError:
    """An upstream HTTP error body (either shape); non-JSON bodies keep their text as the message."""
    message = ""
    raw: str | None = None
    try:
        obj = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        obj = None
    err = obj.get("error") if isinstance(obj, dict) else None
    if isinstance(err, list) and err and isinstance(err[0], dict):  # some Google front ends wrap it in a list
        err = err[0].get("error", err[0])
    if isinstance(err, dict):
        message = str(err.get("message") or "")
        code = err.get("code")
        if isinstance(code, str) and code:
            raw = code
        elif isinstance(err.get("status"), str) and err["status"]:
            raw = err["status"].lower()
    elif isinstance(err, str):
        message = err
    if not message:
        message = body.decode("utf-8", "replace")[:2000] if body else f"upstream returned HTTP {status}"
    lasting = is_lasting(status, raw, error_reasons(obj))
    return GatewayError(kind_for_status(status), message, status, raw=raw, origin=DIALECT, lasting=lasting)


def error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def render_error(err: GatewayError) -> tuple[int, dict[str, Any]]:
    status = 503 if err.status == 529 else err.status  # Anthropic's overloaded status means nothing here
    return status, error_body(code_for(err.kind, err.raw, err.origin), err.message)
