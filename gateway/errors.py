"""Gateway error kinds: one exception type, a small set of kinds, and the HTTP status of each.

Each dialect renders a ``GatewayError`` into its own error body (``dialects/<name>/errors.py``);
this module only knows the kinds. ``raw`` keeps the provider's own error type/code so a caller of
the same dialect as the upstream sees it unchanged, and ``origin`` names that dialect.
"""

from __future__ import annotations

from typing import Literal

ErrorKind = Literal[
    "invalid_request",  # 400
    "guardrail_blocked",  # 400: a guardrail (gateway/guardrails/) refused the request or the answer
    "authentication",  # 401
    "permission",  # 403
    "not_found",  # 404
    "request_too_large",  # 413
    "unsupported_media_type",  # 415
    "rate_limit",  # 429
    "api_error",  # 500 (upstream internal error)
    "bad_gateway",  # 502 (upstream unreachable or spoke nonsense)
    "overloaded",  # 529 for Anthropic callers, 503 elsewhere
    "timeout",  # 504
    "truncated",  # stream ended without its terminator
    "cancelled",  # stopped on request
]

STATUS_BY_KIND: dict[str, int] = {
    "invalid_request": 400,
    "guardrail_blocked": 400,
    "authentication": 401,
    "permission": 403,
    "not_found": 404,
    "request_too_large": 413,
    "unsupported_media_type": 415,
    "rate_limit": 429,
    "api_error": 500,
    "bad_gateway": 502,
    "overloaded": 503,
    "timeout": 504,
    "truncated": 502,
    "cancelled": 499,
}


# HTTP statuses no wait can heal: the credentials were refused (401), the account must pay (402:
# Anthropic's billing_error, DeepSeek's "Insufficient Balance", OpenRouter's credits), or is not
# allowed (403: a region, a disabled project, a key without access). Each dialect's errors.py adds
# the codes its providers use for the same on other statuses (OpenAI's 429 insufficient_quota …).
LASTING_STATUSES = frozenset({401, 402, 403})


def kind_for_status(status: int) -> str:
    """The error kind an upstream HTTP status stands for."""
    if status == 400 or status == 422:
        return "invalid_request"
    if status == 401:
        return "authentication"
    if status == 403:
        return "permission"
    if status == 404:
        return "not_found"
    if status == 413:
        return "request_too_large"
    if status == 429:
        return "rate_limit"
    if status in (503, 529):
        return "overloaded"
    if status == 504 or status == 408:
        return "timeout"
    if status >= 500:
        return "api_error"
    return "invalid_request"


class GatewayError(Exception):
    def __init__(
        self,
        kind: str,
        message: str,
        status: int | None = None,
        *,
        raw: str | None = None,
        origin: str | None = None,
        param: str | None = None,
        retry_after: float | None = None,
        lasting: bool = False,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status if status is not None else STATUS_BY_KIND.get(kind, 500)
        self.raw = raw
        self.origin = origin
        self.param = param
        self.retry_after = retry_after
        # Set by the dialect that decoded the error (its errors.py knows its providers' codes):
        # True when waiting cannot heal it (a spent account, a refused key), so the gateway does
        # not retry it and does not cool the target as a rate limit would; the next target is tried.
        self.lasting = lasting

    @property
    def heals_by_waiting(self) -> bool:
        """Whether the same request to the same upstream may succeed later (see ``lasting``)."""
        return not self.lasting

    def __repr__(self) -> str:
        return f"GatewayError({self.kind!r}, {self.message!r}, status={self.status})"


def invalid(message: str, param: str | None = None) -> GatewayError:
    return GatewayError("invalid_request", message, 400, param=param)
