"""Azure OpenAI: Chat Completions (``dialect = "openai-chat"``) and Responses (``"openai-responses"``).

``base_url`` is the resource's endpoint (``https://my-resource.openai.azure.com``; a trailing
``/openai`` or ``/openai/v1`` is dropped). The route depends on ``api_version``:

* a dated version (``2025-04-01-preview`` …): Chat on the deployment's route,
  ``/openai/deployments/{deployment}/chat/completions?api-version=…``; Responses on
  ``/openai/responses?api-version=…`` (Responses has no deployment route: the deployment is the
  body's ``model``), as Azure's own client (``openai.AzureOpenAI``) sends them;
* ``v1`` (the GA v1 API, no dated version): ``/openai/v1/chat/completions`` and
  ``/openai/v1/responses``, the deployment in ``model``; ``preview`` adds ``?api-version=preview``.

The deployment is ``deployments[upstream_model]``, else the upstream model's own name (a
deployment named after its model). The body's ``model`` is the deployment on every route, as the
Azure client sends it.

Auth: the ``api-key`` header when a key is configured (``api_key`` / ``api_key_env``), else
Microsoft Entra ID bearer tokens (gateway/platforms/azure_auth.py, the ``[azure]`` extra).

Azure's stream quirks (a first chunk with ``choices: []`` and ``prompt_filter_results``, chunks
carrying only ``content_filter_results``, ``finish_reason: "content_filter"``) are the Chat
decoder's (gateway/dialects/openai_chat/stream_decode.py): nothing here.
"""

from __future__ import annotations

import importlib.util
from urllib.parse import quote

import httpx

from gateway.dialects.base import UpstreamCall
from gateway.platforms.base import ConfigError, Platform
from gateway.settings import ProviderSettings

DIALECTS = ("openai-chat", "openai-responses")
V1 = ("v1", "preview")  # the v1 API's versions: no deployment in the path


def deployment(s: ProviderSettings, upstream_model: str) -> str:
    return s.deployments.get(upstream_model, upstream_model)


class Azure(Platform):
    name = "azure"
    extra = "azure"
    packages = ()  # azure-identity only without an api-key: checked in check()

    def check(self, s: ProviderSettings) -> None:
        if s.dialect not in DIALECTS:
            raise ConfigError(f"provider {s.name!r}: platform 'azure' serves the dialects {', '.join(DIALECTS)}, not {s.dialect!r}")
        if not (s.endpoint_url or s.base_url):
            raise ConfigError(f"provider {s.name!r}: platform 'azure' needs base_url (the resource endpoint, https://<resource>.openai.azure.com)")
        if not s.api_version:
            raise ConfigError(f"provider {s.name!r}: platform 'azure' needs api_version (a dated one such as \"2025-04-01-preview\", or \"v1\")")
        if not s.key() and (importlib.util.find_spec("azure") is None or importlib.util.find_spec("azure.identity") is None):
            raise ConfigError(f"provider {s.name!r}: platform 'azure' without an api key uses Microsoft Entra ID, which needs azure-identity: pip install 'llm-gateway[azure]'")

    def base_url(self, s: ProviderSettings) -> str:
        base = (s.endpoint_url or s.base_url).rstrip("/")
        for tail in ("/openai/v1", "/openai"):
            if base.endswith(tail):
                return base[: -len(tail)]
        return base

    def adapt(self, call: UpstreamCall, upstream_model: str, s: ProviderSettings) -> UpstreamCall:
        version = s.api_version or ""
        name = deployment(s, upstream_model)
        endpoint = call.path.rsplit("/", 1)[-1]  # "completions" (chat) or "responses"
        if version in V1:
            call.path = "/openai/v1" + ("/chat/completions" if s.dialect == "openai-chat" else "/responses")
            call.params = {**call.params, "api-version": version} if version == "preview" else call.params
        elif s.dialect == "openai-chat" and endpoint == "completions":
            call.path = f"/openai/deployments/{quote(name, safe='')}/chat/completions"
            call.params = {**call.params, "api-version": version}
        else:
            call.path = "/openai" + call.path
            call.params = {**call.params, "api-version": version}
        if isinstance(call.body.get("model"), str):
            call.body = {**call.body, "model": name}
        return call

    def headers(self, s: ProviderSettings) -> dict[str, str]:
        key = s.key()
        return {"api-key": key} if key else {}

    def auth(self, s: ProviderSettings) -> httpx.Auth | None:
        if s.key():
            return None
        from gateway.platforms.azure_auth import entra_auth

        return entra_auth(s.name)

    def credential_source(self, s: ProviderSettings) -> str:
        if s.key():
            return "api-key " + super().credential_source(s)
        from gateway.platforms.azure_auth import credential_source

        return credential_source()


PLATFORM = Azure()
