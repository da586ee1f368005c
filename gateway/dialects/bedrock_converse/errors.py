"""Bedrock errors → ``GatewayError`` (HTTP) and ``StreamError`` (exception frames in a stream).

Bedrock answers a failed call with ``{"message": "..."}`` and names the error in the
``x-amzn-ErrorType`` header; ``decode_error`` gets only the status and the body, and each status
stands for one exception of botocore's model (``ValidationException`` 400,
``AccessDeniedException`` 403, ``ResourceNotFoundException`` 404, ``ModelTimeoutException`` 408,
``ModelErrorException`` 424, ``ThrottlingException`` / ``ModelNotReadyException`` 429,
``InternalServerException`` 500, ``ServiceUnavailableException`` 503). A body that names its type
(``__type``, as some AWS JSON errors do) is kept in ``raw``.

After the 200 a failure arrives as an exception message of the eventstream; the platform's framer
hands it over as a frame whose ``event`` is the ``:exception-type`` (``throttlingException`` …) and
whose data is ``{"message": "..."}``. Throttling keeps its 429 meaning (retried before the first
byte), a validation failure is a 400, the server-side ones are 5xx.

``render_error`` exists for the codec protocol only: no caller speaks Converse.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.errors import LASTING_STATUSES, STATUS_BY_KIND, GatewayError, kind_for_status
from gateway.events import StreamError
from gateway.framing.eventstream import EXCEPTIONS

DIALECT = "bedrock-converse"

# exception type -> (kind, status): one table for every Bedrock stream, the framer's (gateway/framing/eventstream.py)
KIND_BY_EXCEPTION = EXCEPTIONS


EXCEPTION_BY_STATUS: dict[int, str] = {
    400: "ValidationException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    424: "ModelErrorException",
    429: "ThrottlingException",
    500: "InternalServerException",
    503: "ServiceUnavailableException",
}

EXCEPTION_BY_KIND: dict[str, str] = {
    "invalid_request": "ValidationException",
    "guardrail_blocked": "ValidationException",
    "authentication": "AccessDeniedException",
    "permission": "AccessDeniedException",
    "not_found": "ResourceNotFoundException",
    "rate_limit": "ThrottlingException",
    "overloaded": "ServiceUnavailableException",
    "timeout": "ModelTimeoutException",
}


def _key(exception: str) -> str:
    """``ThrottlingException`` / ``com.amazon…#ThrottlingException`` → ``throttlingException``."""
    name = exception.rpartition("#")[2].partition(":")[0].strip()
    return name[:1].lower() + name[1:]


def is_exception(event: str) -> bool:
    return event.endswith("Exception")


def _message(obj: Any) -> str | None:
    if isinstance(obj, dict):
        for key in ("message", "Message"):
            value = obj.get(key)
            if isinstance(value, str):
                return value
    return None


def decode_error(status: int, body: bytes) -> GatewayError:
    """An HTTP error reply: the status decides the kind, the body keeps the text."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        obj = None
    message = _message(obj)
    if message is None:
        text = body.decode("utf-8", "replace").strip()
        message = text[:2000] or f"upstream returned HTTP {status}"
    named = obj.get("__type") if isinstance(obj, dict) else None
    raw = named.rpartition("#")[2] if isinstance(named, str) and named else EXCEPTION_BY_STATUS.get(status)
    if status == 424:
        return GatewayError("bad_gateway", message, 502, raw=raw, origin=DIALECT)
    if 400 <= status < 600:  # 403 AccessDeniedException / UnrecognizedClientException: no wait heals those
        lasting = status in LASTING_STATUSES
        return GatewayError(kind_for_status(status), message, status, raw=raw, origin=DIALECT, lasting=lasting)
    kind, status = KIND_BY_EXCEPTION.get(_key(raw or "").lower(), ("bad_gateway", 502))
    return GatewayError(kind, message, status, raw=raw, origin=DIALECT)


def stream_error(exception: str, data: Any) -> StreamError:
    """An exception frame of the stream (``exception`` is its ``:exception-type``)."""
    key = _key(exception)
    kind, status = KIND_BY_EXCEPTION.get(key.lower(), ("bad_gateway", 502))
    message = _message(data) or f"bedrock stream failed: {key}"
    if key == "modelStreamErrorException" and isinstance(data, dict):
        original = data.get("originalMessage")
        if isinstance(original, str) and original and original not in message:
            message = f"{message} ({original})"
    return StreamError(kind, message, status, raw=key[:1].upper() + key[1:])


def render_error(err: GatewayError) -> tuple[int, dict[str, Any]]:
    """Bedrock's own error shape (for the codec protocol: no caller endpoint speaks Converse)."""
    status = err.status or STATUS_BY_KIND.get(err.kind, 500)
    return status, {
        "message": err.message,
        "__type": err.raw
        if err.origin == DIALECT and err.raw
        else EXCEPTION_BY_KIND.get(err.kind, "InternalServerException"),
    }
