"""Google Vertex AI: Gemini (``dialect = "gemini"``) and Claude (``dialect = "anthropic"``).

Hosts: ``{location}-aiplatform.googleapis.com`` for a region, ``aiplatform.googleapis.com`` for
``global``, ``aiplatform.{us,eu}.rep.googleapis.com`` for the ``us`` / ``eu`` multi-regions
(``endpoint_url`` overrides the host). Paths, below ``/v1/projects/{project}/locations/{location}``:

* Gemini: ``/publishers/google/models/{m}:streamGenerateContent?alt=sse`` (the codec's Gemini API
  call, its body unchanged: the generateContent request is the same JSON on both);
* Claude: ``/publishers/anthropic/models/{m}:streamRawPredict`` (``:rawPredict`` for a whole
  answer), the Messages body without ``model`` (it is in the path) and with
  ``anthropic_version: "vertex-2023-10-16"`` in place of the ``anthropic-version`` header;
  ``stream`` stays in the body (Vertex reads it, as Anthropic's own Vertex client sends it);
  ``anthropic-beta`` stays a header. Vertex's own extra stream events are ignored (with a
  warning) by the Anthropic decoder, as any unknown event is;
* Interactions (``gemini-interactions``): ``/v1beta1/projects/{p}/locations/{l}/interactions``, as
  google-genai's client routes it on Vertex.

Errors from Vertex's front end (quota, auth, a model not enabled) come in Google's format
(``{"error": {"code", "message", "status"}}``) even for Claude: decoded as such whatever the dialect.

Auth: Google OAuth access tokens from Application Default Credentials (gateway/platforms/google_auth.py).
"""

from __future__ import annotations

from urllib.parse import quote

import httpx
import orjson

from gateway.dialects.base import UpstreamCall
from gateway.dialects.gemini.request_build import model_path
from gateway.dialects.registry import codec_for
from gateway.errors import GatewayError
from gateway.platforms.base import ConfigError, Platform
from gateway.settings import ProviderSettings

ANTHROPIC_VERSION = "vertex-2023-10-16"
DIALECTS = ("gemini", "anthropic", "gemini-interactions")


def host(location: str) -> str:
    """The Vertex AI host serving ``location``."""
    if location == "global":
        return "https://aiplatform.googleapis.com"
    if location in ("us", "eu"):
        return f"https://aiplatform.{location}.rep.googleapis.com"
    return f"https://{location}-aiplatform.googleapis.com"


class Vertex(Platform):
    name = "vertex"
    extra = "vertex"
    packages = ("google.auth", "google.oauth2.service_account", "requests")

    def check(self, s: ProviderSettings) -> None:
        if s.dialect not in DIALECTS:
            raise ConfigError(f"provider {s.name!r}: platform 'vertex' serves the dialects {', '.join(DIALECTS)}, not {s.dialect!r}")
        missing = [what for what, value in (("project", s.project), ("location", s.location)) if not value]
        if missing:
            raise ConfigError(f"provider {s.name!r}: platform 'vertex' needs {' and '.join(missing)} (e.g. project = \"my-project\", location = \"us-central1\")")
        super().check(s)

    def base_url(self, s: ProviderSettings) -> str:
        return s.endpoint_url or s.base_url or host(s.location or "")

    def _prefix(self, s: ProviderSettings, version: str = "v1") -> str:
        return f"/{version}/projects/{quote(s.project or '', safe='')}/locations/{quote(s.location or '', safe='')}"

    def adapt(self, call: UpstreamCall, upstream_model: str, s: ProviderSettings) -> UpstreamCall:
        if s.dialect == "gemini":
            method = call.path.rsplit(":", 1)[1]  # streamGenerateContent / generateContent / countTokens
            model = model_path(upstream_model)
            where = f"/v1/{model}" if model.startswith("projects/") else f"{self._prefix(s)}/publishers/google/models/{model}"
            call.path = f"{where}:{method}"
        elif s.dialect == "anthropic":
            body = dict(call.body)
            body.pop("model", None)
            body["anthropic_version"] = ANTHROPIC_VERSION
            method = "streamRawPredict" if body.get("stream") else "rawPredict"
            call.path = f"{self._prefix(s)}/publishers/anthropic/models/{quote(upstream_model, safe='@')}:{method}"
            call.body = body
        elif s.dialect == "gemini-interactions" and call.path.startswith("/v1beta/interactions"):
            call.path = self._prefix(s, "v1beta1") + call.path[len("/v1beta") :]
        return call

    def count_call(self, call: UpstreamCall, upstream_model: str, s: ProviderSettings) -> UpstreamCall | None:
        """Claude: ``…/publishers/anthropic/models/count-tokens:rawPredict``, the model in the body
        (as Anthropic's Vertex client sends it); Gemini: ``…/models/{m}:countTokens`` with
        ``contents`` / ``systemInstruction`` / ``tools`` at the top (no ``generateContentRequest``)."""
        if s.dialect == "anthropic":
            call.path = f"{self._prefix(s)}/publishers/anthropic/models/count-tokens:rawPredict"
            call.body = {**call.body, "model": upstream_model, "anthropic_version": ANTHROPIC_VERSION}
            return call
        if s.dialect == "gemini":
            inner = call.body.get("generateContentRequest")
            if isinstance(inner, dict):
                call.body = {k: v for k, v in inner.items() if k != "model"}
            model = model_path(upstream_model)
            where = f"/v1/{model}" if model.startswith("projects/") else f"{self._prefix(s)}/publishers/google/models/{model}"
            call.path, call.params = f"{where}:countTokens", {}
            return call
        return None

    def headers(self, s: ProviderSettings) -> dict[str, str]:
        return {}  # the bearer token comes from auth(); Claude's version is in the body

    def auth(self, s: ProviderSettings) -> httpx.Auth | None:
        from gateway.platforms.google_auth import google_auth

        return google_auth(s.name, s.token_url)

    def decode_error(self, status: int, headers: httpx.Headers, body: bytes) -> GatewayError | None:
        """Google's error format (``error.status`` a string) from Vertex's front end, for any dialect."""
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            return None
        error = parsed.get("error") if isinstance(parsed, dict) else None
        if isinstance(error, dict) and isinstance(error.get("status"), str):
            return codec_for("gemini").decode_error(status, body)
        return None

    def credential_source(self, s: ProviderSettings) -> str:
        from gateway.platforms.google_auth import credential_source

        return "Application Default Credentials: " + credential_source()


PLATFORM = Vertex()
