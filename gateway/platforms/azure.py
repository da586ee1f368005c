"""Azure OpenAI, for the dialects whose package has an ``azure.py`` adapter (Chat Completions, Responses).

``base_url`` is the resource's endpoint (``https://my-resource.openai.azure.com``; a trailing
``/openai`` or ``/openai/v1`` is dropped). The route is the dialect's adapter's and depends on
``api_version`` (``on_v1``):

* a dated version (``2025-04-01-preview`` …): below ``/openai`` (Chat on the deployment's route
  ``/openai/deployments/{deployment}/chat/completions``), with ``?api-version=…``, as Azure's own
  client (``openai.AzureOpenAI``) sends them;
* ``v1`` (the GA v1 API, no dated version): below ``/openai/v1``, the deployment in ``model``;
  ``preview`` adds ``?api-version=preview``.

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

import httpx

from gateway.dialects.base import UpstreamCall
from gateway.dialects.cloud import azure_deployment
from gateway.platforms.base import CloudPlatform, ConfigError
from gateway.settings import ProviderSettings


def with_api_version(params: dict[str, str], s: ProviderSettings) -> dict[str, str]:
    """The ``api-version`` query: a dated version's, and ``preview``'s; none for ``v1``."""
    version = s.api_version or ""
    return params if version == "v1" else {**params, "api-version": version}


class Azure(CloudPlatform):
    name = "azure"
    extra = "azure"
    packages = ()  # azure-identity only without an api-key: checked in check()

    def check(self, s: ProviderSettings) -> None:
        self.check_dialect(s)
        if not (s.endpoint_url or s.base_url):
            raise ConfigError(
                f"provider {s.name!r}: platform 'azure' needs base_url (the resource endpoint, https://<resource>.openai.azure.com)"
            )
        if not s.api_version:
            raise ConfigError(
                f'provider {s.name!r}: platform \'azure\' needs api_version (a dated one such as "2025-04-01-preview", or "v1")'
            )
        if not s.key() and (
            importlib.util.find_spec("azure") is None or importlib.util.find_spec("azure.identity") is None
        ):
            raise ConfigError(
                f"provider {s.name!r}: platform 'azure' without an api key uses Microsoft Entra ID, which needs azure-identity: pip install 'llm-gateway[azure]'"
            )

    def base_url(self, s: ProviderSettings) -> str:
        base = (s.endpoint_url or s.base_url).rstrip("/")
        for tail in ("/openai/v1", "/openai"):
            if base.endswith(tail):
                return base[: -len(tail)]
        return base

    def adapt(self, call: UpstreamCall, upstream_model: str, s: ProviderSettings) -> UpstreamCall:
        """The adapter's route, then what holds on every route: the version, the deployment as ``model``."""
        call = self.on(s).adapt(call, upstream_model, s)
        call.params = with_api_version(call.params, s)
        if isinstance(call.body.get("model"), str):
            call.body = {**call.body, "model": azure_deployment(s, upstream_model)}
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
