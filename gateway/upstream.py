"""Upstream providers: one pooled ``httpx2.AsyncClient`` each, the provider's own auth, streamed.

``httpx2`` is pydantic's maintained continuation of httpx (same API). httpx 0.28 / httpcore 1.0
scans every pooled connection for every waiting request and evicts idle connections past 200
(encode/httpcore#1035): the 1,000-stream soak in ``bench/`` failed with 743 errors and +17 % RSS on
it, and passed with 0 errors and +0.3 % on httpx2.

The caller's key never reaches this module: headers sent upstream are built here from the
provider's own key plus the few provider headers a codec chose to forward (``UpstreamCall.headers``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import httpx2 as httpx  # pydantic's maintained httpx: same API, fixed connection pool (README)
import orjson

from gateway.dialects.base import UpstreamCall
from gateway.settings import ProviderSettings

log = logging.getLogger("gateway.upstream")

# Headers a codec may set on an UpstreamCall that must not override ours.
_RESERVED = {"authorization", "x-api-key", "x-goog-api-key", "host", "content-length", "content-type"}


@dataclass(slots=True)
class ConnectionGauge:
    """How many upstream responses are open right now (tests assert it returns to zero)."""

    open: int = 0


@dataclass(slots=True)
class Provider:
    settings: ProviderSettings
    client: httpx.AsyncClient | None = None
    gauge: ConnectionGauge = field(default_factory=ConnectionGauge)
    _auth: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.settings.name

    @property
    def dialect(self) -> str:
        return self.settings.dialect

    def start(self) -> None:
        s = self.settings
        if s.dialect == "demo" or self.client is not None:
            return
        self._auth = auth_headers(s)
        limits = httpx.Limits(max_connections=s.max_connections, max_keepalive_connections=min(s.max_connections, 200), keepalive_expiry=30)
        timeout = httpx.Timeout(connect=s.connect_timeout, read=None, write=30.0, pool=s.connect_timeout)
        self.client = httpx.AsyncClient(limits=limits, timeout=timeout, follow_redirects=False, trust_env=False)

    async def close(self) -> None:
        if self.client is not None:
            await self.client.aclose()
            self.client = None

    def url(self, call: UpstreamCall) -> str:
        return self.settings.base_url.rstrip("/") + call.path

    async def send(self, call: UpstreamCall) -> httpx.Response:
        """Send ``call`` and return the response with its body still unread (streamed).

        The caller must ``await response.aclose()`` (``close_response`` does it and keeps the gauge).
        """
        assert self.client is not None, "provider not started"
        headers = {"content-type": "application/json", "accept": "text/event-stream, application/json", "accept-encoding": "identity"}
        for name, value in self.settings.headers.items():
            headers[name.lower()] = value
        for name, value in call.headers.items():
            if name.lower() not in _RESERVED:
                headers[name.lower()] = value
        headers.update(self._auth)
        content = orjson.dumps(call.body) if call.method != "GET" else None
        if content is None:
            headers.pop("content-type", None)
        request = self.client.build_request(call.method, self.url(call), params=call.params or None, headers=headers, content=content)
        response = await self.client.send(request, stream=True)
        self.gauge.open += 1
        return response

    async def close_response(self, response: httpx.Response) -> None:
        try:
            await response.aclose()
        finally:
            self.gauge.open -= 1


def auth_headers(s: ProviderSettings) -> dict[str, str]:
    key = s.key()
    headers: dict[str, str] = {}
    if s.dialect == "anthropic":
        headers["anthropic-version"] = "2023-06-01"
        if key:
            headers["x-api-key"] = key
    elif s.dialect in ("openai-chat", "openai-responses"):
        if key:
            headers["authorization"] = f"Bearer {key}"
    elif s.dialect in ("gemini", "gemini-interactions"):
        if key:
            headers["x-goog-api-key"] = key
    return headers
