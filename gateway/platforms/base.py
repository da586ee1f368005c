"""What a platform is: where a dialect's wire format is spoken, and how to reach it there.

A provider has a ``dialect`` (the JSON it speaks: gateway/dialects/) and a ``platform`` (who
serves it: the provider's own API, or AWS Bedrock, Google Vertex AI, Azure OpenAI). The codec
builds the dialect's call as for the provider's own API; the platform then decides, without the
pipeline knowing which platform it is:

* ``base_url``: the host the calls go to (``endpoint_url`` overrides it: a private endpoint, a
  regional gateway, a test double);
* ``adapt``: the call's path, query and body as the platform wants them (Bedrock: the model in the
  path, no ``model``/``stream`` in the body, ``anthropic_version: bedrock-2023-05-31``);
* ``headers`` and ``auth``: static credentials as headers (API keys), per-request credentials as an
  ``httpx.Auth`` (SigV4, Google OAuth, Microsoft Entra ID), which httpx runs on every request and
  which may retry once after a 401 with a refreshed token;
* ``framer``: how the body is cut into frames (SSE for most; AWS eventstream binary framing on
  Bedrock), always ``gateway.sse.SSEFrame``s, so the dialect's decoder never knows;
* ``decode_error``: the platform's own error bodies (Bedrock's ``{"message"}`` + ``x-amzn-ErrorType``),
  before the codec's;
* ``check``: at startup, that the settings are complete and the platform's optional extra is
  installed, with a message that names the extra — never at the first request;
* ``credential_source``: for ``check-config``, where the credentials come from (never their value).

Adding a platform: a module here with a ``PLATFORM`` (a ``Platform`` subclass instance) and one
line in ``gateway/platforms/__init__.py``'s ``MODULES``.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Protocol

import httpx

from gateway.dialects.registry import codec_for
from gateway.errors import GatewayError
from gateway.events import StreamError
from gateway.sse import SSEDecoder, SSEFrame

if TYPE_CHECKING:
    from gateway.dialects.base import UpstreamCall
    from gateway.settings import ProviderSettings


class Framer(Protocol):
    """Bytes off the socket → frames. ``gateway.sse.SSEDecoder`` is the model."""

    def feed(self, chunk: bytes) -> list[SSEFrame]:
        """The frames completed by ``chunk`` (split anywhere). May raise ``FramerError``."""

    def close(self) -> bool:
        """End of input: True when the body ended cleanly between frames (else: truncation)."""


class FramerError(Exception):
    """Raised by ``Framer.feed`` for what ends the stream in the framing itself: a platform's
    exception frame after the 200 (Bedrock ``throttlingException``), a bad checksum. The event
    source ends the stream with ``error`` (never garbage, never a silent end). ``frames``: those
    the same ``feed`` completed before it, decoded first (a read may bring both)."""

    def __init__(self, error: StreamError, frames: list[SSEFrame] | None = None) -> None:
        super().__init__(error.message)
        self.error = error
        self.frames = frames or []


class ConfigError(ValueError):
    """A provider's platform settings are incomplete or its extra is not installed (startup)."""


class Platform:
    """The provider's own API: the base of every platform, and the one used without ``platform``."""

    name: str = "direct"
    extra: str | None = None  # pip install 'llm-gateway[<extra>]'
    packages: tuple[str, ...] = ()  # the modules that extra brings, checked at startup

    def check(self, s: ProviderSettings) -> None:
        """Raise ``ConfigError`` if ``s`` cannot work on this platform (called at startup)."""
        missing = [p for p in self.packages if importlib.util.find_spec(p.split(".")[0]) is None or importlib.util.find_spec(p) is None]
        if missing:
            raise ConfigError(f"provider {s.name!r}: platform {self.name!r} needs {', '.join(missing)}: pip install 'llm-gateway[{self.extra}]'")
        if not self.base_url(s):
            raise ConfigError(f"provider {s.name!r} needs a base_url")

    def base_url(self, s: ProviderSettings) -> str:
        return s.endpoint_url or s.base_url

    def adapt(self, call: UpstreamCall, upstream_model: str, s: ProviderSettings) -> UpstreamCall:
        """The codec's call as this platform wants it (path, query, body). Direct: unchanged."""
        return call

    def count_call(self, call: UpstreamCall, upstream_model: str, s: ProviderSettings) -> UpstreamCall | None:
        """The codec's token-counting call (Anthropic ``count_tokens``, Gemini ``countTokens``) as
        this platform wants it; None: no counting route on this platform (the gateway estimates)."""
        return call if self.name == "direct" else None

    def headers(self, s: ProviderSettings) -> dict[str, str]:
        """Static headers that authenticate (and version) every request: the dialect's own."""
        return codec_for(s.dialect).auth_headers(s.key())

    def auth(self, s: ProviderSettings) -> httpx.Auth | None:
        """Per-request credentials, run by the provider's client on every request."""
        return None

    def framer(self, s: ProviderSettings) -> Framer:
        return SSEDecoder()

    def decode_error(self, status: int, headers: httpx.Headers, body: bytes) -> GatewayError | None:
        """The platform's own error body as a ``GatewayError``; None: the codec decodes it."""
        return None

    def credential_source(self, s: ProviderSettings) -> str:
        """Where the credentials come from, for ``check-config`` (a name, never a value)."""
        if s.api_key is not None:
            return "api_key in the config"
        if s.api_key_env:
            return f"${s.api_key_env}" + ("" if s.key() else " (NOT SET)")
        return "no key"


DIRECT = Platform()
