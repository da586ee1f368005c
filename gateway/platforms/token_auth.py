"""Bearer tokens that expire, as an ``httpx.Auth``: shared by Google OAuth (Vertex) and Entra ID (Azure).

The platform gives a blocking ``fetch(fresh)`` that returns ``(token, expires_at)`` (wall-clock
seconds); this class decides when to call it and keeps it off the event loop:

* the token is cached and reused until it nears its expiry: the margin is five minutes, or a
  quarter of the token's lifetime for short-lived tokens (a two-second token is not refetched on
  every request);
* one fetch at a time, under an ``asyncio.Lock``, run in a worker thread (``asyncio.to_thread``):
  the credential libraries (google-auth, azure-identity) do blocking I/O;
* a 401 from the platform drops the token (never sent again, even if it claims an hour left: it
  may have been revoked) and the request is retried once with a token fetched with
  ``fresh=True`` (the library must not hand back its own cached copy). A second 401 goes back to
  the caller as the platform's refusal.

The token is a secret: it lives on this object only, goes into the ``authorization`` header and
nowhere else (no log line, no error message carries it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable, Generator

import httpx

MARGIN = 300.0  # refresh this long before expiry (a quarter of the lifetime for shorter tokens)

Fetch = Callable[[bool], tuple[str, float]]


class TokenAuth(httpx.Auth):
    """``authorization: Bearer <token>`` on every request, the token refreshed before it expires."""

    requires_request_body = False
    requires_response_body = False

    def __init__(self, fetch: Fetch, extra_headers: Callable[[], dict[str, str]] | None = None) -> None:
        self._fetch = fetch
        self._extra = extra_headers
        self._token: str | None = None
        self._refresh_at = 0.0
        self._lock: asyncio.Lock | None = None
        self.fetches = 0  # how many tokens were fetched (tests, metrics)

    def _fresh_enough(self) -> bool:
        return self._token is not None and time.time() < self._refresh_at

    async def token(self, refused: str | None = None) -> str:
        """A valid token; ``refused``: the token the platform just answered 401 to (never reused)."""
        if refused is None and self._fresh_enough():
            assert self._token is not None
            return self._token
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if refused is not None and self._token == refused:
                self._token = None  # revoked or expired early: drop it before anything else
            if self._fresh_enough():  # another request refreshed while this one waited
                assert self._token is not None
                return self._token
            token, expires_at = await asyncio.to_thread(self._fetch, refused is not None)
            self.fetches += 1
            now = time.time()
            lifetime = max(0.0, expires_at - now)
            self._token = token
            self._refresh_at = expires_at - min(MARGIN, lifetime / 4)
            return token

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        token = await self.token()
        self._apply(request, token)
        response = yield request
        if response.status_code == 401:
            self._apply(request, await self.token(refused=token))
            yield request

    def _apply(self, request: httpx.Request, token: str) -> None:
        request.headers["authorization"] = "Bearer " + token
        if self._extra is not None:
            request.headers.update(self._extra())

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        raise RuntimeError("platform auth runs on the gateway's async clients only")
        yield request  # pragma: no cover
