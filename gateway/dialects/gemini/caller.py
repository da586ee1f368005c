"""What the gateway serves to Gemini callers besides the model call: the model list
(``GET /v1beta/models``) and ``:countTokens``, in the Gemini API's shapes. Every Gemini call is a
``/{version}/models/{model}:{action}`` path; the action picks the call or the count."""

from __future__ import annotations

from typing import Any

from gateway.dialects.base import CallerRoute, ModelAction, UpstreamCall

from .request_build import model_path

ACTIONS = (
    ModelAction("generateContent", stream=False),
    ModelAction("streamGenerateContent", stream=True),
    ModelAction("countTokens", "count"),
    ModelAction("embedContent", "embed"),  # the wire: embeddings.py
    ModelAction("batchEmbedContents", "embed"),
)
# the SDKs use v1beta; google-genai without an explicit api_version asks for v1
ROUTES = tuple(
    CallerRoute(f"/{version}/models/{{target:path}}", "model_action", actions=ACTIONS) for version in ("v1beta", "v1")
)


def recognises(path: str, header_names: Any, query_keys: Any) -> bool:
    """google-genai: ``/v1beta/…``, its key header or ``x-goog-api-client``, or ``?key=``."""
    return (
        path.startswith("/v1beta/")
        or b"x-goog-api-key" in header_names
        or b"x-goog-api-client" in header_names
        or "key" in query_keys
    )


class Models:
    def entry(self, name: str, created: int) -> dict[str, Any]:
        return {
            "name": f"models/{name}",
            "version": "gateway",
            "displayName": name,
            "inputTokenLimit": 1048576,
            "outputTokenLimit": 65536,
            "supportedGenerationMethods": [
                "generateContent",
                "streamGenerateContent",
                "countTokens",
                "embedContent",
                "batchEmbedContents",
            ],
        }

    def listing(self, names: list[str], created: int) -> dict[str, Any]:
        return {"models": [self.entry(n, created) for n in names]}


_REQUEST_FIELDS = ("contents", "systemInstruction", "tools")


class Counting:
    counts_upstream = True

    def caller_body(self, body: dict[str, Any]) -> dict[str, Any]:
        inner = body.get("generateContentRequest")
        return inner if isinstance(inner, dict) else body

    def answer(self, tokens: int) -> dict[str, Any]:
        return {"totalTokens": tokens}

    def upstream_call(self, call: UpstreamCall, upstream_model: str) -> UpstreamCall | None:
        """``countTokens`` takes bare ``contents``, or a whole ``generateContentRequest`` when the
        system instruction and tools count too."""
        built = call.body
        call.path = f"/v1beta/models/{model_path(upstream_model)}:countTokens"
        call.params = {}
        body: dict[str, Any] = {"contents": built.get("contents", [])}
        if "systemInstruction" in built or "tools" in built:
            body = {
                "generateContentRequest": {
                    "model": f"models/{upstream_model}",
                    **{k: v for k, v in built.items() if k in _REQUEST_FIELDS},
                }
            }
        call.body = body
        return call


MODELS = Models()
COUNTING = Counting()
