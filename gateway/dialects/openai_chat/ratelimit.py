"""OpenAI's rate-limit headers and 429 error codes, as the gateway's key limits report them.

OpenAI sends ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}`` on every answer (reset as a
duration such as ``6m0s`` or ``1s``); a refusal's ``error.type`` says which limit (``requests`` or
``tokens``) and a spent quota is ``insufficient_quota``. The Responses dialect uses the same.
"""

from __future__ import annotations

import math

# refusal reason (gateway/store/counters.py) -> (error type, error code)
REFUSAL_CODES: dict[str, tuple[str, str]] = {
    "requests": ("requests", "rate_limit_exceeded"),
    "tokens": ("tokens", "rate_limit_exceeded"),
    "insufficient_quota": ("insufficient_quota", "insufficient_quota"),
}


def _duration(seconds: float) -> bytes:
    return f"{max(0, math.ceil(seconds))}s".encode()


def headers(
    rpm: int | None, requests_left: int | None, tpm: int | None, tokens_left: int | None, reset_in: float
) -> list[tuple[bytes, bytes]]:
    out: list[tuple[bytes, bytes]] = []
    if rpm is not None:
        out += [
            (b"x-ratelimit-limit-requests", str(rpm).encode()),
            (b"x-ratelimit-remaining-requests", str(requests_left or 0).encode()),
            (b"x-ratelimit-reset-requests", _duration(reset_in)),
        ]
    if tpm is not None:
        out += [
            (b"x-ratelimit-limit-tokens", str(tpm).encode()),
            (b"x-ratelimit-remaining-tokens", str(tokens_left or 0).encode()),
            (b"x-ratelimit-reset-tokens", _duration(reset_in)),
        ]
    return out
