"""OpenAI error bodies ⇄ ``GatewayError``.

OpenAI answers every failure with ``{"error": {"message", "type", "param", "code"}}`` (the same
object appears inside a stream as ``data: {"error": {...}}``). The SDK picks its exception class by
HTTP status alone, so the ``type``/``code`` values below are the ones OpenAI itself sends, for
callers that log or branch on them:

* 400 ``invalid_request_error`` · 401 ``invalid_request_error`` + code ``invalid_api_key`` ·
  403 ``permission_error`` · 404 ``invalid_request_error`` + code ``model_not_found`` ·
  429 ``requests`` + code ``rate_limit_exceeded`` · 500/502/504 ``server_error`` ·
  503 ``server_error`` + code ``service_unavailable``.

When the error came from an OpenAI-chat upstream (``origin``) its own ``type`` (kept in ``raw``)
is passed back unchanged; a body without a ``type`` (Azure OpenAI: ``"type": null``) keeps its
``code`` instead, passed back as the ``code`` (``content_filter``, ``DeploymentNotFound``). Azure
also sends the HTTP status as a string ``code`` (``"429"``): a status, never a type or code.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.dialects.openai_chat.ratelimit import REFUSAL_CODES
from gateway.errors import LASTING_STATUSES, STATUS_BY_KIND, GatewayError, kind_for_status
from gateway.events import StreamError

DIALECT = "openai-chat"

# kind -> (type, code)
RENDER: dict[str, tuple[str, str | None]] = {
    "invalid_request": ("invalid_request_error", None),
    "guardrail_blocked": ("invalid_request_error", "guardrail_blocked"),
    "authentication": ("invalid_request_error", "invalid_api_key"),
    "permission": ("permission_error", None),
    "not_found": ("invalid_request_error", "model_not_found"),
    "request_too_large": ("invalid_request_error", "request_too_large"),
    "unsupported_media_type": ("invalid_request_error", "unsupported_media_type"),
    "rate_limit": ("requests", "rate_limit_exceeded"),
    "api_error": ("server_error", None),
    "bad_gateway": ("server_error", "bad_gateway"),
    "overloaded": ("server_error", "service_unavailable"),
    "timeout": ("server_error", "timeout"),
    "truncated": ("server_error", "stream_truncated"),
    "cancelled": ("server_error", "cancelled"),
}

# OpenAI error type or code -> kind, for errors without a useful HTTP status (in-stream ones).
KIND_BY_TYPE: dict[str, str] = {
    "invalid_request_error": "invalid_request",
    "context_length_exceeded": "invalid_request",
    "authentication_error": "authentication",
    "invalid_api_key": "authentication",
    "permission_error": "permission",
    "request_forbidden": "permission",
    "not_found_error": "not_found",
    "model_not_found": "not_found",
    "rate_limit_exceeded": "rate_limit",
    "rate_limit_error": "rate_limit",
    "requests": "rate_limit",
    "tokens": "rate_limit",
    "insufficient_quota": "rate_limit",
    "server_error": "api_error",
    "api_error": "api_error",
    "internal_error": "api_error",
    "service_unavailable": "overloaded",
    "overloaded": "overloaded",
    "overloaded_error": "overloaded",
    "timeout": "timeout",
    "content_filter": "invalid_request",  # Azure's prompt filter (a 400; in a stream too)
}

# Upstream ``code`` values passed back to an OpenAI caller as its ``code`` (not its ``type``).
CODES = frozenset(
    {
        "content_filter",
        "context_length_exceeded",
        "model_not_found",
        "invalid_api_key",
        "DeploymentNotFound",
        "rate_limit_exceeded",
    }
)


# Error types / codes OpenAI (and the compatible vendors) send for what no wait can heal: a spent
# account (429 ``insufficient_quota``: "You exceeded your current quota, please check your plan and
# billing details"), a hard billing limit, a refused or deactivated key, a region OpenAI does not
# serve. Not retried, and the target is not cooled as for a rate limit (gateway/relay/attempts.py).
LASTING_CODES = frozenset(
    {
        "insufficient_quota",
        "billing_hard_limit_reached",
        "billing_not_active",
        "invalid_api_key",
        "account_deactivated",
        "access_terminated",
        "unsupported_country_region_territory",
    }
)


def is_lasting(status: int | None, etype: str | None, code: str | None) -> bool:
    """Whether an OpenAI-shaped error cannot heal by waiting (``LASTING_CODES``, 401/402/403)."""
    return (status in LASTING_STATUSES) or etype in LASTING_CODES or code in LASTING_CODES


def _fields(error: Any) -> tuple[str, str | None, str | None, str | None]:
    """(message, type, code, param) of an ``error`` value, tolerating compat servers' shapes."""
    if isinstance(error, str):
        return error, None, None, None
    if not isinstance(error, dict):
        return "upstream error", None, None, None
    message = error.get("message")
    if not isinstance(message, str) or not message:
        message = orjson.dumps(error).decode()
    etype = error.get("type")
    code = error.get("code")
    param = error.get("param")
    return (
        message,
        etype if isinstance(etype, str) else None,
        code if isinstance(code, str) and code and not code.isdigit() else None,  # "429": Azure's status, not a code
        param if isinstance(param, str) else None,
    )


def _raw(etype: str | None, code: str | None) -> str | None:
    """What an OpenAI caller gets back of the upstream's own words: a code it acts on
    (``context_length_exceeded``, ``content_filter`` …) before the type that names the class of
    error, except for a rate limit, whose type says which limit (``tokens``, ``requests``)."""
    if code in CODES and etype not in REFUSAL_CODES:
        return code
    return etype or code


def _status_hint(error: Any) -> int | None:
    """The HTTP status an error object names: ``code`` 429 / ``"429"`` (Azure), or ``status``."""
    if not isinstance(error, dict):
        return None
    for value in (error.get("code"), error.get("status")):
        if isinstance(value, str) and value.isdigit():
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and 400 <= value < 600:
            return value
    return None


def _kind_from_type(etype: str | None, code: str | None) -> str | None:
    for key in (code, etype):
        if key is not None and key in KIND_BY_TYPE:
            return KIND_BY_TYPE[key]
    return None


def decode_error(status: int, body: bytes) -> GatewayError:
    """An upstream HTTP error response. The HTTP status decides the kind; the body keeps the text."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        obj = None
    if isinstance(obj, dict) and "error" in obj:
        message, etype, code, param = _fields(obj["error"])
    elif isinstance(obj, dict) and isinstance(obj.get("message"), str):
        message, etype, code, param = _fields(obj)
    else:
        text = body.decode("utf-8", "replace").strip()
        message, etype, code, param = (text[:2000] or f"upstream returned HTTP {status}"), None, None, None
    if 400 <= status < 600:
        kind = kind_for_status(status)
    else:
        kind = _kind_from_type(etype, code) or "bad_gateway"
        status = STATUS_BY_KIND.get(kind, 502)
    return GatewayError(
        kind,
        message,
        status,
        raw=_raw(etype, code),
        origin=DIALECT,
        param=param,
        lasting=is_lasting(status, etype, code),
    )


def stream_error(error: Any) -> StreamError:
    """``data: {"error": {...}}`` inside a stream (or an ``error`` in a 200 JSON body)."""
    message, etype, code, _param = _fields(error)
    status_hint = _status_hint(error)
    kind = _kind_from_type(etype, code)
    if kind is None and status_hint is not None:
        kind = kind_for_status(status_hint)
    kind = kind or "api_error"
    return StreamError(
        kind,
        message,
        STATUS_BY_KIND.get(kind, 500),
        raw=_raw(etype, code),
        lasting=is_lasting(status_hint, etype, code),
    )


def error_object(
    kind: str, message: str, raw: str | None, same_dialect: bool, param: str | None = None
) -> dict[str, Any]:
    etype, code = RENDER.get(kind, ("server_error", None))
    if kind == "rate_limit" and raw in REFUSAL_CODES:  # which limit: requests, tokens, or a spent quota
        etype, code = REFUSAL_CODES[raw]
    elif same_dialect and raw in CODES:
        code = raw
    elif same_dialect and raw:
        etype = raw
    return {"message": message, "type": etype, "param": param, "code": code}


def render_error(err: GatewayError) -> tuple[int, dict[str, Any]]:
    same = err.origin == DIALECT
    return err.status, {"error": error_object(err.kind, err.message, err.raw, same, err.param)}
