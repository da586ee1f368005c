"""Chat Completions on Azure OpenAI: the route (gateway/platforms/azure.py keeps the rest: the
``api-version`` query, the deployment as the body's ``model``, the host and the credentials).

* a dated ``api_version``: the deployment's route, ``/openai/deployments/{deployment}/chat/completions``;
* the v1 API (``v1`` / ``preview``): ``/openai/v1/chat/completions``, the deployment in ``model``.

* dated versions before ``2024-09-01-preview`` (``2024-06-01``, ``2024-02-01``, ``2023-05-15`` …)
  refuse ``stream_options`` and ``max_completion_tokens`` ("Unrecognized request argument
  supplied", a 400; Azure/azure-rest-api-specs#29157, openai/openai-python#1469): the first is
  left out (those versions send no usage in a stream), the second is sent as ``max_tokens``.

Azure's stream quirks (a first chunk with ``choices: []`` and ``prompt_filter_results``, chunks
with only ``content_filter_results``, ``finish_reason: "content_filter"``) are the Chat decoder's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import quote

from gateway.dialects.base import OnPlatform, UpstreamCall
from gateway.dialects.cloud import azure_deployment, azure_on_v1

if TYPE_CHECKING:
    from gateway.dialects.cloud import CloudSettings


FIRST_WITH_STREAM_OPTIONS = "2024-09-01"  # the first dated api-version with stream_options, max_completion_tokens


def before_stream_options(version: str) -> bool:
    """Whether a dated ``api_version`` predates ``stream_options`` / ``max_completion_tokens``."""
    return version[:4].isdigit() and version[:10] < FIRST_WITH_STREAM_OPTIONS


class OnAzure(OnPlatform):
    def adapt(self, call: UpstreamCall, upstream_model: str, s: CloudSettings) -> UpstreamCall:

        if azure_on_v1(s):
            call.path = "/openai/v1/chat/completions"
        elif call.path.rsplit("/", 1)[-1] == "completions":
            call.path = f"/openai/deployments/{quote(azure_deployment(s, upstream_model), safe='')}/chat/completions"
        else:
            call.path = "/openai" + call.path
        if before_stream_options(s.api_version or "") and (
            "stream_options" in call.body or "max_completion_tokens" in call.body
        ):
            body = dict(call.body)
            body.pop("stream_options", None)
            if "max_completion_tokens" in body:
                body.setdefault("max_tokens", body.pop("max_completion_tokens"))
            call.body = body
        return call


ADAPTER = OnAzure()
