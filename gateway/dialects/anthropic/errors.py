"""Anthropic error bodies ⇄ ``GatewayError`` / ``StreamError``.

Anthropic answers failures with ``{"type": "error", "error": {"type", "message"}, "request_id"}``
(HTTP) and the same object as ``event: error`` inside a stream. The SDK picks its exception class by
HTTP status; the ``error.type`` values are the documented ones below. Overloaded is HTTP 529 at
Anthropic (503 elsewhere), so an overloaded error that came from Anthropic is rendered with 529.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.errors import LASTING_STATUSES, STATUS_BY_KIND, GatewayError, kind_for_status
from gateway.events import StreamError

DIALECT = "anthropic"

# Anthropic error type -> (kind, HTTP status Anthropic uses for it)
KIND_BY_TYPE: dict[str, tuple[str, int]] = {
    "invalid_request_error": ("invalid_request", 400),
    "authentication_error": ("authentication", 401),
    "billing_error": ("permission", 402),
    "permission_error": ("permission", 403),
    "not_found_error": ("not_found", 404),
    "request_too_large": ("request_too_large", 413),
    "rate_limit_error": ("rate_limit", 429),
    "api_error": ("api_error", 500),
    "timeout_error": ("timeout", 504),
    "overloaded_error": ("overloaded", 529),
}

TYPE_BY_KIND: dict[str, str] = {
    "invalid_request": "invalid_request_error",
    "guardrail_blocked": "invalid_request_error",
    "authentication": "authentication_error",
    "permission": "permission_error",
    "not_found": "not_found_error",
    "request_too_large": "request_too_large",
    "unsupported_media_type": "invalid_request_error",
    "rate_limit": "rate_limit_error",
    "api_error": "api_error",
    "bad_gateway": "api_error",
    "overloaded": "overloaded_error",
    "timeout": "timeout_error",
    "truncated": "api_error",
    "cancelled": "api_error",
}


# Error types no wait can heal (Anthropic's documented errors): a refused key, a key without
# access, and billing (402 ``billing_error``). A spent prepaid balance comes as 400
# ``invalid_request_error`` "Your credit balance is too low to access the Anthropic API…": the
# account, not the request, so it is lasting too (another target may serve the request).
LASTING_TYPES = frozenset({"authentication_error", "permission_error", "billing_error"})
_CREDIT_BALANCE = "credit balance is too low"


def is_lasting(status: int | None, etype: str | None, message: str | None) -> bool:
    """Whether an Anthropic error cannot heal by waiting (``LASTING_TYPES``, 401/402/403, a spent balance)."""
    return (
        status in LASTING_STATUSES
        or etype in LASTING_TYPES
        or (message is not None and _CREDIT_BALANCE in message.lower())
    )


def _fields(obj: Any) -> tuple[str | None, str | None]:
    """(type, message) of an Anthropic error envelope or bare error object."""
    if not isinstance(obj, dict):
        return None, None
    error = obj.get("error", obj)
    if isinstance(error, str):
        return None, error
    if not isinstance(error, dict):
        return None, None
    etype = error.get("type")
    message = error.get("message")
    return (etype if isinstance(etype, str) else None, message if isinstance(message, str) else None)


def decode_error(status: int, body: bytes) -> GatewayError:
    """An upstream HTTP error response: the status decides the kind, the body keeps type and text."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        obj = None
    etype, message = _fields(obj)
    if message is None:
        text = body.decode("utf-8", "replace").strip()
        message = text[:2000] or f"upstream returned HTTP {status}"
    if 400 <= status < 600:
        kind = kind_for_status(status)
    else:
        kind, status = KIND_BY_TYPE.get(etype or "", ("bad_gateway", 502))
    return GatewayError(kind, message, status, raw=etype, origin=DIALECT, lasting=is_lasting(status, etype, message))


def stream_error(obj: Any) -> StreamError:
    """``event: error`` inside a stream: the kind follows the error type (there is no status)."""
    etype, message = _fields(obj)
    kind, status = KIND_BY_TYPE.get(etype or "", ("api_error", 500))
    return StreamError(kind, message or "upstream error", status, raw=etype, lasting=is_lasting(None, etype, message))


def error_type(kind: str, raw: str | None, same_dialect: bool = False) -> str:
    """The ``error.type`` to show: the raw value when it is Anthropic's own (and means the same kind,
    so another dialect's ``invalid_request_error`` on a 404 does not mislead), else by kind."""
    if raw is not None and raw in KIND_BY_TYPE and (same_dialect or KIND_BY_TYPE[raw][0] == kind):
        return raw
    return TYPE_BY_KIND.get(kind, "api_error")


def error_body(kind: str, message: str, raw: str | None, same_dialect: bool = False) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type(kind, raw, same_dialect), "message": message}}


def render_error(err: GatewayError) -> tuple[int, dict[str, Any]]:
    status = err.status
    if err.kind == "overloaded" and err.origin == DIALECT:
        status = 529
    elif not status:
        status = STATUS_BY_KIND.get(err.kind, 500)
    return status, error_body(err.kind, err.message, err.raw, err.origin == DIALECT)
