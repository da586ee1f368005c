"""Upstream providers: one connection pool each (``http_pool.py``), the provider's own auth.

The caller's key never reaches this module: headers sent upstream are built here from the
provider's own key plus the few provider headers a codec chose to forward (``UpstreamCall.headers``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import orjson

from gateway.dialects.base import UpstreamCall
from gateway.http_client import Response
from gateway.http_pool import ConnectionPool
from gateway.settings import ProviderSettings

log = logging.getLogger("gateway.upstream")

# Headers a codec may set on an UpstreamCall that must not override ours.
USER_AGENT = "llm-gateway/0.1"

_RESERVED = {"authorization", "x-api-key", "x-goog-api-key", "host", "content-length", "content-type"}


@dataclass(slots=True)
class ConnectionGauge:
    """How many upstream responses are open right now (tests assert it returns to zero)."""

    open: int = 0


@dataclass(slots=True)
class Provider:
    settings: ProviderSettings
    pool: ConnectionPool | None = None
    gauge: ConnectionGauge = field(default_factory=ConnectionGauge)
    _base_headers: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.settings.name

    @property
    def dialect(self) -> str:
        return self.settings.dialect

    def start(self) -> None:
        s = self.settings
        if s.dialect == "demo" or self.pool is not None:
            return
        headers = {"user-agent": USER_AGENT, "accept": "text/event-stream, application/json", "accept-encoding": "identity"}
        for name, value in s.headers.items():
            headers[name.lower()] = value
        headers.update(auth_headers(s))
        self._base_headers = headers
        self.pool = ConnectionPool(
            max_connections=s.max_connections,
            keepalive_expiry=s.keepalive_expiry,
            connect_timeout=s.connect_timeout,
            pool_timeout=s.connect_timeout,
            ca_file=s.ca_file,
            proxy=s.proxy.get_secret_value() if s.proxy else None,  # a secret: it may hold credentials
        )

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.aclose()
            self.pool = None

    def url(self, call: UpstreamCall) -> str:
        # A query in base_url (Azure's ?api-version=…) stays a query, after the call's path.
        base, _, query = self.settings.base_url.partition("?")
        return base.rstrip("/") + call.path + ("?" + query if query else "")

    async def send(self, call: UpstreamCall) -> Response:
        """Send ``call`` and return the response with its body still unread (streamed).

        The caller must ``close_response`` it (which keeps the gauge right).
        """
        assert self.pool is not None, "provider not started"
        headers = dict(self._base_headers)
        for name, value in call.headers.items():
            lowered = name.lower()
            if lowered not in _RESERVED:
                headers[lowered] = value
        body = orjson.dumps(call.body) if call.method != "GET" else None
        if body is not None:
            headers["content-type"] = "application/json"
        response = await self.pool.send(call.method, self.url(call), headers, body, call.params or None)
        self.gauge.open += 1
        return response

    async def close_response(self, response: Response) -> None:
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
