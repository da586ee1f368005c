"""Google Vertex AI, for the dialects whose package has a ``vertex.py`` adapter (Gemini, Claude,
Interactions).

Hosts: ``{location}-aiplatform.googleapis.com`` for a region, ``aiplatform.googleapis.com`` for
``global``, ``aiplatform.{us,eu}.rep.googleapis.com`` for the ``us`` / ``eu`` multi-regions
(``endpoint_url`` overrides the host). Each dialect's paths are its adapter's, below the
platform's ``prefix``, ``/v1/projects/{project}/locations/{location}`` (Gemini:
``…/publishers/google/models/{m}:streamGenerateContent``; Claude:
``…/publishers/anthropic/models/{m}:streamRawPredict``; Interactions: ``/v1beta1/…/interactions``).

Errors from Vertex's front end (quota, auth, a model not enabled) come in Google's format
(``{"error": {"code", "message", "status"}}``) even for Claude: decoded as such whatever the
dialect, by the module that owns that shape (the gemini package's ``errors``).

Streams: SSE, minus Vertex's own ``vertex_event`` frames (usage metadata Vertex adds to Claude's
stream, vercel/ai#13436): no dialect defines them, and on the same-dialect fast path they would
reach a caller whose schema-strict client fails on an unknown event (``VertexSSE``).

Auth: Google OAuth access tokens from Application Default Credentials (gateway/platforms/google_auth.py).
"""

from __future__ import annotations

import httpx
import orjson

from gateway.dialects.gemini import errors as google_errors
from gateway.errors import GatewayError
from gateway.framing.base import Framer, SSEFrame
from gateway.framing.sse import SSEDecoder
from gateway.platforms.base import CloudPlatform, ConfigError
from gateway.settings import ProviderSettings

VERTEX_ONLY_EVENTS = frozenset({"vertex_event"})


class VertexSSE:
    """SSE without Vertex's own events (``VERTEX_ONLY_EVENTS``), which no dialect's caller expects."""

    __slots__ = ("_sse",)

    def __init__(self) -> None:
        self._sse = SSEDecoder()

    def feed(self, chunk: bytes) -> list[SSEFrame]:
        frames = self._sse.feed(chunk)
        if any(f.event in VERTEX_ONLY_EVENTS for f in frames):
            frames = [f for f in frames if f.event not in VERTEX_ONLY_EVENTS]
        return frames

    def close(self) -> bool:
        return self._sse.close()


def host(location: str) -> str:
    """The Vertex AI host serving ``location``."""
    if location == "global":
        return "https://aiplatform.googleapis.com"
    if location in ("us", "eu"):
        return f"https://aiplatform.{location}.rep.googleapis.com"
    return f"https://{location}-aiplatform.googleapis.com"


class Vertex(CloudPlatform):
    name = "vertex"
    extra = "vertex"
    packages = ("google.auth", "google.oauth2.service_account", "requests")

    def check(self, s: ProviderSettings) -> None:
        self.check_dialect(s)
        missing = [what for what, value in (("project", s.project), ("location", s.location)) if not value]
        if missing:
            raise ConfigError(
                f'provider {s.name!r}: platform \'vertex\' needs {" and ".join(missing)} (e.g. project = "my-project", location = "us-central1")'
            )
        super().check(s)

    def base_url(self, s: ProviderSettings) -> str:
        return s.endpoint_url or s.base_url or host(s.location or "")

    def headers(self, s: ProviderSettings) -> dict[str, str]:
        return {}  # the bearer token comes from auth(); Claude's version is in the body

    def framer(self, s: ProviderSettings) -> Framer:
        return VertexSSE()

    def auth(self, s: ProviderSettings) -> httpx.Auth | None:
        from gateway.platforms.google_auth import google_auth

        return google_auth(s.name, s.token_url)

    def decode_error(self, status: int, headers: httpx.Headers, body: bytes) -> GatewayError | None:
        """Google's error format (``error.status`` a string) from Vertex's front end, for any dialect;
        also as the one-element JSON array Vertex answers for ``streamGenerateContent`` /
        ``streamRawPredict`` (``[{"error": …}]``)."""
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            return None
        if isinstance(parsed, list) and parsed:
            parsed = parsed[0]
        error = parsed.get("error") if isinstance(parsed, dict) else None
        if isinstance(error, dict) and isinstance(error.get("status"), str):
            return google_errors.decode_error(status, body)
        return None

    def credential_source(self, s: ProviderSettings) -> str:
        from gateway.platforms.google_auth import credential_source

        return "Application Default Credentials: " + credential_source()


PLATFORM = Vertex()
