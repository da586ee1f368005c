"""Gemini on Google Vertex AI: the Gemini API call, its body unchanged (the generateContent
request is the same JSON on both), at ``…/publishers/google/models/{m}:{method}`` below the
platform's ``/v1/projects/{project}/locations/{location}`` (gateway/platforms/vertex.py
``prefix``); a model given as a full ``projects/…`` resource name goes to ``/v1/{name}``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.dialects.base import OnPlatform, UpstreamCall
from gateway.dialects.cloud import vertex_prefix

from .request_build import model_path

if TYPE_CHECKING:
    from gateway.dialects.cloud import CloudSettings


def model_route(upstream_model: str, s: CloudSettings) -> str:
    """Where the model's methods are on Vertex (``{this}:{method}``)."""

    model = model_path(upstream_model)
    return f"/v1/{model}" if model.startswith("projects/") else f"{vertex_prefix(s)}/publishers/google/models/{model}"


class OnVertex(OnPlatform):
    def adapt(self, call: UpstreamCall, upstream_model: str, s: CloudSettings) -> UpstreamCall:
        method = call.path.rsplit(":", 1)[1]  # streamGenerateContent / generateContent / countTokens
        call.path = f"{model_route(upstream_model, s)}:{method}"
        return call

    def count_call(self, call: UpstreamCall, upstream_model: str, s: CloudSettings) -> UpstreamCall | None:
        """``…/models/{m}:countTokens`` with ``contents`` / ``systemInstruction`` / ``tools`` at the
        top (Vertex has no ``generateContentRequest`` wrapper)."""
        inner = call.body.get("generateContentRequest")
        if isinstance(inner, dict):
            call.body = {k: v for k, v in inner.items() if k != "model"}
        call.path, call.params = f"{model_route(upstream_model, s)}:countTokens", {}
        return call


ADAPTER = OnVertex()
