"""Amazon Titan text embeddings on Bedrock: one InvokeModel call per input.

Body ``{"inputText", "dimensions"?, "normalize"?}`` (v2: dimensions 256 / 512 / 1024, normalized
by default here as OpenAI's and Gemini's vectors are), answer ``{"embedding": [...],
"inputTextTokenCount"}``. Titan v1 (``amazon.titan-embed-text-v1``) takes only ``inputText``.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.dialects.base import UpstreamCall
from gateway.dialects.bedrock_embed import header_tokens
from gateway.dialects.cloud import bedrock_model_path
from gateway.dialects.embeddings import (
    Answer,
    EmbedPart,
    EmbedRequest,
    EmbedResult,
    bad_answer,
    cut_float_arrays,
    float_vector,
)
from gateway.errors import GatewayError


def _v2(model: str) -> bool:
    return "titan-embed-text-v2" in model


class TitanWire:
    name = "bedrock-titan"
    takes_tokens = False

    def max_batch(self, model: str) -> int:
        return 1  # InvokeModel embeds one inputText

    def max_dimensions(self, model: str) -> int | None:
        return 1024 if _v2(model) else 1536

    def supports_dimensions(self, model: str) -> bool:
        return _v2(model)

    def build(self, req: EmbedRequest, part: EmbedPart, model: str, settings: Any) -> UpstreamCall:
        body: dict[str, Any] = {"inputText": part.inputs[0]}
        if _v2(model):
            if req.dimensions is not None:
                body["dimensions"] = req.dimensions
            body["normalize"] = True
        return UpstreamCall(bedrock_model_path(model, stream=False), body)

    def decode(self, answer: Answer, part: EmbedPart, req: EmbedRequest) -> EmbedResult:
        try:
            body, arrays = cut_float_arrays(answer.body, b"embedding")  # floats stay bytes
            obj = orjson.loads(body)
            vector = float_vector(obj["embedding"], self.name, iter(arrays))
        except GatewayError:
            raise
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise bad_answer(self.name, f"{type(exc).__name__} reading embedding") from None
        tokens = obj.get("inputTextTokenCount")
        return EmbedResult([vector], tokens if type(tokens) is int else header_tokens(answer.headers))


WIRE = TitanWire()
