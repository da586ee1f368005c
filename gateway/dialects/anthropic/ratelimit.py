"""Anthropic's rate-limit headers: ``anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}``,
the reset as an RFC 3339 time (as Anthropic sends them on every answer)."""

from __future__ import annotations

import time
from datetime import UTC, datetime


def headers(
    rpm: int | None, requests_left: int | None, tpm: int | None, tokens_left: int | None, reset_in: float
) -> list[tuple[bytes, bytes]]:
    reset = datetime.fromtimestamp(time.time() + reset_in, UTC).strftime("%Y-%m-%dT%H:%M:%SZ").encode()
    out: list[tuple[bytes, bytes]] = []
    if rpm is not None:
        out += [
            (b"anthropic-ratelimit-requests-limit", str(rpm).encode()),
            (b"anthropic-ratelimit-requests-remaining", str(requests_left or 0).encode()),
            (b"anthropic-ratelimit-requests-reset", reset),
        ]
    if tpm is not None:
        out += [
            (b"anthropic-ratelimit-tokens-limit", str(tpm).encode()),
            (b"anthropic-ratelimit-tokens-remaining", str(tokens_left or 0).encode()),
            (b"anthropic-ratelimit-tokens-reset", reset),
        ]
    return out
