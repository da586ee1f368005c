"""What a platform is: where a dialect's wire format is spoken, and how to reach it there.

A provider has a ``dialect`` (the JSON it speaks: gateway/dialects/) and a ``platform`` (who
serves it: the provider's own API, or AWS Bedrock, Google Vertex AI, Azure OpenAI). The codec
builds the dialect's call as for the provider's own API; the platform then decides, without the
pipeline knowing which platform it is:

* ``base_url``: the host the calls go to (``endpoint_url`` overrides it: a private endpoint, a
  regional gateway, a test double);
* ``adapt``: the call's path, query and body as the platform wants them. What depends on the
  dialect (Claude on Bedrock: the model in the path, no ``model``/``stream`` in the body, its
  ``anthropic_version``) is the dialect's adapter, ``OnPlatform`` in its package
  (``gateway/dialects/<d>/<platform>.py``, listed in the codec's ``platforms``), which a
  ``CloudPlatform`` asks; the platform adds what holds for every dialect on it;
* ``headers`` and ``auth``: static credentials as headers (API keys), per-request credentials as an
  ``httpx.Auth`` (SigV4, Google OAuth, Microsoft Entra ID), which httpx runs on every request and
  which may retry once after a 401 with a refreshed token;
* ``framer``: how the body is cut into frames (SSE for most; AWS eventstream binary framing on
  Bedrock, each message made a frame by the adapter's ``unwrap``), always
  ``gateway.framing.sse.SSEFrame``s, so the dialect's decoder never knows;
* ``decode_error``: the platform's own error bodies (Bedrock's ``{"message"}`` + ``x-amzn-ErrorType``),
  before the codec's;
* ``check``: at startup, that the settings are complete, the platform's optional extra is
  installed (a message that names the extra) and the dialect has an adapter here — never at the
  first request;
* ``credential_source``: for ``check-config``, where the credentials come from (never their value).

Adding a platform: a module here with a ``PLATFORM`` (a ``CloudPlatform`` subclass instance) and
one line in ``gateway/platforms/__init__.py``'s ``MODULES``; then, for each dialect it serves, a
``<platform>.py`` adapter in the dialect's package and one entry in its codec's ``platforms``.
Nothing here names a dialect: helpers the adapters share (Vertex's project/location prefix,
Azure's version rule) are functions of the platform's module, which adapters import lazily.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

import httpx

from gateway.dialects.registry import available, codec_for
from gateway.errors import GatewayError
from gateway.framing.base import Framer
from gateway.framing.sse import SSEDecoder

if TYPE_CHECKING:
    from gateway.dialects.base import OnPlatform, UpstreamCall
    from gateway.settings import ProviderSettings


class ConfigError(ValueError):
    """A provider's platform settings are incomplete or its extra is not installed (startup)."""


class Platform:
    """The provider's own API: the base of every platform, and the one used without ``platform``."""

    name: str = "direct"
    extra: str | None = None  # pip install 'llm-gateway[<extra>]'
    packages: tuple[str, ...] = ()  # the modules that extra brings, checked at startup

    def check(self, s: ProviderSettings) -> None:
        """Raise ``ConfigError`` if ``s`` cannot work on this platform (called at startup)."""
        missing = [
            p
            for p in self.packages
            if importlib.util.find_spec(p.split(".")[0]) is None or importlib.util.find_spec(p) is None
        ]
        if missing:
            raise ConfigError(
                f"provider {s.name!r}: platform {self.name!r} needs {', '.join(missing)}: pip install 'llm-gateway[{self.extra}]'"
            )
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
        return call

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


class CloudPlatform(Platform):
    """A platform other than the provider's own API: the dialect's part of each call is its adapter's."""

    def on(self, s: ProviderSettings) -> OnPlatform:
        """The provider's dialect on this platform (``check_dialect`` refused one without an adapter)."""
        adapter = codec_for(s.dialect).platforms.get(self.name)
        if adapter is None:
            raise ConfigError(self._unserved(s))
        return adapter

    def check_dialect(self, s: ProviderSettings) -> None:
        """Raise ``ConfigError`` if no adapter in the dialect's package serves it on this platform."""
        if self.name not in codec_for(s.dialect).platforms:
            raise ConfigError(self._unserved(s))

    def _unserved(self, s: ProviderSettings) -> str:
        served = [d for d in available() if self.name in codec_for(d).platforms]
        return f"provider {s.name!r}: platform {self.name!r} serves the dialects {', '.join(served)}, not {s.dialect!r}"

    def adapt(self, call: UpstreamCall, upstream_model: str, s: ProviderSettings) -> UpstreamCall:
        return self.on(s).adapt(call, upstream_model, s)

    def count_call(self, call: UpstreamCall, upstream_model: str, s: ProviderSettings) -> UpstreamCall | None:
        return self.on(s).count_call(call, upstream_model, s)
