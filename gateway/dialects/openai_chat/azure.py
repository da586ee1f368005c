"""Chat Completions on Azure OpenAI: the route (gateway/platforms/azure.py keeps the rest: the
``api-version`` query, the deployment as the body's ``model``, the host and the credentials).

* a dated ``api_version``: the deployment's route, ``/openai/deployments/{deployment}/chat/completions``;
* the v1 API (``v1`` / ``preview``): ``/openai/v1/chat/completions``, the deployment in ``model``.

Azure's stream quirks (a first chunk with ``choices: []`` and ``prompt_filter_results``, chunks
with only ``content_filter_results``, ``finish_reason: "content_filter"``) are the Chat decoder's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import quote

from gateway.cloud import azure_deployment, azure_on_v1
from gateway.dialects.base import OnPlatform, UpstreamCall

if TYPE_CHECKING:
    from gateway.cloud import CloudSettings


class OnAzure(OnPlatform):
    def adapt(self, call: UpstreamCall, upstream_model: str, s: CloudSettings) -> UpstreamCall:

        if azure_on_v1(s):
            call.path = "/openai/v1/chat/completions"
        elif call.path.rsplit("/", 1)[-1] == "completions":
            call.path = f"/openai/deployments/{quote(azure_deployment(s, upstream_model), safe='')}/chat/completions"
        else:
            call.path = "/openai" + call.path
        return call


ADAPTER = OnAzure()
