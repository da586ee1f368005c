"""Gemini error bodies: ``{"error": {"code": 429, "message": "...", "status": "RESOURCE_EXHAUSTED"}}``.

``status`` is the google.rpc canonical code name; it is the ``raw`` kept on ``GatewayError`` so a
Gemini caller of a Gemini upstream sees it unchanged.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.errors import LASTING_STATUSES, GatewayError, kind_for_status

KIND_BY_STATUS: dict[str, str] = {
    "INVALID_ARGUMENT": "invalid_request",
    "FAILED_PRECONDITION": "invalid_request",
    "OUT_OF_RANGE": "invalid_request",
    "UNAUTHENTICATED": "authentication",
    "PERMISSION_DENIED": "permission",
    "NOT_FOUND": "not_found",
    "RESOURCE_EXHAUSTED": "rate_limit",
    "INTERNAL": "api_error",
    "UNKNOWN": "api_error",
    "DATA_LOSS": "api_error",
    "UNIMPLEMENTED": "invalid_request",
    "UNAVAILABLE": "overloaded",
    "DEADLINE_EXCEEDED": "timeout",
    "CANCELLED": "cancelled",
    "ABORTED": "api_error",
    "ALREADY_EXISTS": "invalid_request",
}

STATUS_BY_KIND: dict[str, str] = {
    "invalid_request": "INVALID_ARGUMENT",
    "guardrail_blocked": "INVALID_ARGUMENT",
    "authentication": "UNAUTHENTICATED",
    "permission": "PERMISSION_DENIED",
    "not_found": "NOT_FOUND",
    "request_too_large": "INVALID_ARGUMENT",
    "unsupported_media_type": "INVALID_ARGUMENT",
    "rate_limit": "RESOURCE_EXHAUSTED",
    "api_error": "INTERNAL",
    "bad_gateway": "UNAVAILABLE",
    "overloaded": "UNAVAILABLE",
    "timeout": "DEADLINE_EXCEEDED",
    "truncated": "UNAVAILABLE",
    "cancelled": "CANCELLED",
}


# What no wait heals at Google: the canonical statuses of refused credentials, and the
# ``google.rpc.ErrorInfo`` reasons of a bad key or a project that cannot be billed — an invalid key
# is a 400 INVALID_ARGUMENT with reason ``API_KEY_INVALID``, so the reason decides, not the status.
# (RESOURCE_EXHAUSTED stays a rate limit: Google's quotas refill, and say when in RetryInfo.)
LASTING_STATUS_NAMES = frozenset({"UNAUTHENTICATED", "PERMISSION_DENIED"})
LASTING_REASONS = frozenset(
    {
        "API_KEY_INVALID",
        "API_KEY_EXPIRED",
        "API_KEY_SERVICE_BLOCKED",
        "API_KEY_HTTP_REFERRER_BLOCKED",
        "API_KEY_IP_ADDRESS_BLOCKED",
        "BILLING_DISABLED",
        "BILLING_NOT_ACTIVE",
        "CONSUMER_SUSPENDED",
        "SERVICE_DISABLED",
        "ACCESS_TOKEN_SCOPE_INSUFFICIENT",
    }
)


def error_reasons(obj: Any) -> set[str]:
    """The ``ErrorInfo`` reasons in a Google error object's ``details`` (also list-wrapped)."""
    if isinstance(obj, list) and obj:
        obj = obj[0]
    err = obj.get("error") if isinstance(obj, dict) else None
    details = err.get("details") if isinstance(err, dict) else None
    return (
        {
            d["reason"]
            for d in details or ()
            if isinstance(d, dict)
            and str(d.get("@type", "")).endswith("ErrorInfo")
            and isinstance(d.get("reason"), str)
        }
        if isinstance(details, list)
        else set()
    )


def is_lasting(http_status: int | None, status_name: str | None, reasons: set[str]) -> bool:
    """Whether a Google error cannot heal by waiting (a refused key, a project without billing)."""
    return (
        http_status in LASTING_STATUSES
        or (status_name is not None and status_name.upper() in LASTING_STATUS_NAMES)
        or not reasons.isdisjoint(LASTING_REASONS)
    )


def error_fields(obj: Any) -> tuple[int | None, str, str | None, float | None]:
    """(code, message, status, retry_after seconds) of a Gemini error object (``{"error": {...}}``)."""
    if isinstance(obj, list) and obj:
        obj = obj[0]
    err = obj.get("error") if isinstance(obj, dict) else None
    if not isinstance(err, dict):
        return None, "", None, None
    code, message, status = err.get("code"), err.get("message"), err.get("status")
    code = code if isinstance(code, int) else None
    message = message if isinstance(message, str) else ""
    status = status if isinstance(status, str) else None
    retry_after = None
    for detail in err.get("details") or ():
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("RetryInfo"):
            delay = detail.get("retryDelay")
            if isinstance(delay, str) and delay.endswith("s"):
                try:
                    retry_after = float(delay[:-1])
                except ValueError:
                    pass
    return code, message, status, retry_after


def kind_for(status_name: str | None, http_status: int) -> str:
    if status_name and status_name in KIND_BY_STATUS:
        return KIND_BY_STATUS[status_name]
    return kind_for_status(http_status)


def decode_error(status: int, body: bytes) -> GatewayError:
    try:
        obj = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        obj = None
    _, message, status_name, retry_after = error_fields(obj)
    if not message:
        message = body.decode("utf-8", "replace")[:2000] if body else f"upstream returned HTTP {status}"
    return GatewayError(
        kind_for(status_name, status),
        message,
        status,
        raw=status_name,
        origin="gemini",
        retry_after=retry_after,
        lasting=is_lasting(status, status_name, error_reasons(obj)),
    )


def status_name(kind: str, raw: str | None, same_dialect: bool) -> str:
    if same_dialect and raw and raw.isupper():
        return raw
    return STATUS_BY_KIND.get(kind, "INTERNAL")


def error_object(code: int, message: str, status: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "status": status}}


def render_error(err: GatewayError) -> tuple[int, dict[str, Any]]:
    status = err.status
    if err.kind == "overloaded" and status == 529:
        status = 503  # 529 is Anthropic's; Google says 503 UNAVAILABLE
    return status, error_object(status, err.message, status_name(err.kind, err.raw, err.origin == "gemini"))
