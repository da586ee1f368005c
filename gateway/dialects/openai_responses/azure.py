"""Responses on Azure OpenAI: ``/openai/responses`` with a dated ``api_version`` (Responses has no
deployment route: the deployment is the body's ``model``), ``/openai/v1/responses`` on the v1 API,
as Azure's own client (``openai.AzureOpenAI``) sends them. gateway/platforms/azure.py keeps the
rest: the ``api-version`` query, the deployment as ``model``, the host and the credentials.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.dialects.base import OnPlatform, UpstreamCall
from gateway.dialects.cloud import azure_on_v1

if TYPE_CHECKING:
    from gateway.dialects.cloud import CloudSettings


class OnAzure(OnPlatform):
    def adapt(self, call: UpstreamCall, upstream_model: str, s: CloudSettings) -> UpstreamCall:

        call.path = "/openai/v1/responses" if azure_on_v1(s) else "/openai" + call.path
        return call


ADAPTER = OnAzure()
