"""Interactions on Google Vertex AI: ``/v1beta1/projects/{p}/locations/{l}/interactions…``, as
google-genai's client routes it on Vertex (gateway/platforms/vertex.py ``prefix``); the body is
unchanged. No counting route.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.dialects.base import OnPlatform, UpstreamCall
from gateway.dialects.cloud import vertex_prefix

if TYPE_CHECKING:
    from gateway.dialects.cloud import CloudSettings


class OnVertex(OnPlatform):
    def adapt(self, call: UpstreamCall, upstream_model: str, s: CloudSettings) -> UpstreamCall:
        if call.path.startswith("/v1beta/interactions"):
            call.path = vertex_prefix(s, "v1beta1") + call.path[len("/v1beta") :]
        return call


ADAPTER = OnVertex()
