"""Claude on Google Vertex AI: ``…/publishers/anthropic/models/{m}:streamRawPredict``.

``:rawPredict`` for a whole answer; the Messages body without ``model`` (it is in the path) and
with ``anthropic_version: "vertex-2023-10-16"`` in place of the ``anthropic-version`` header;
``stream`` stays in the body (Vertex reads it, as Anthropic's own Vertex client sends it);
``anthropic-beta`` stays a header. Vertex's own extra stream events (``vertex_event``) are
dropped by the platform's framer (gateway/platforms/vertex.py), so they reach no caller. Below the platform's
``/v1/projects/{project}/locations/{location}`` (gateway/platforms/vertex.py ``prefix``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import quote

from gateway.dialects.base import OnPlatform, UpstreamCall
from gateway.dialects.cloud import vertex_prefix

if TYPE_CHECKING:
    from gateway.dialects.cloud import CloudSettings

ANTHROPIC_VERSION = "vertex-2023-10-16"


class OnVertex(OnPlatform):
    def adapt(self, call: UpstreamCall, upstream_model: str, s: CloudSettings) -> UpstreamCall:

        body = dict(call.body)
        body.pop("model", None)
        body["anthropic_version"] = ANTHROPIC_VERSION
        method = "streamRawPredict" if body.get("stream") else "rawPredict"
        call.path = f"{vertex_prefix(s)}/publishers/anthropic/models/{quote(upstream_model, safe='@')}:{method}"
        call.body = body
        return call

    def count_call(self, call: UpstreamCall, upstream_model: str, s: CloudSettings) -> UpstreamCall | None:
        """``…/publishers/anthropic/models/count-tokens:rawPredict``, the model in the body (as
        Anthropic's Vertex client sends it)."""

        call.path = f"{vertex_prefix(s)}/publishers/anthropic/models/count-tokens:rawPredict"
        call.body = {**call.body, "model": upstream_model, "anthropic_version": ANTHROPIC_VERSION}
        return call


ADAPTER = OnVertex()
