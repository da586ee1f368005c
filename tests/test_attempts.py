"""How long an upstream asked us to wait before a retry."""

from __future__ import annotations

import email.utils
import time

from gateway.attempts import _retry_after


class FakeResponse:
    def __init__(self, headers: dict[str, str]) -> None:
        self.headers = headers


def test_retry_after_forms() -> None:
    assert _retry_after(FakeResponse({"retry-after-ms": "1500", "retry-after": "9"})) == 1.5  # OpenAI's, finer
    assert _retry_after(FakeResponse({"retry-after": "2"})) == 2.0
    in_30s = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 28 <= _retry_after(FakeResponse({"retry-after": in_30s})) <= 30  # type: ignore[operator]
    assert _retry_after(FakeResponse({"retry-after": email.utils.formatdate(0, usegmt=True)})) == 0.0
    assert _retry_after(FakeResponse({"retry-after": "soon"})) is None
    assert _retry_after(FakeResponse({})) is None
