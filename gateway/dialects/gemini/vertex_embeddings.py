"""Vertex AI's text embeddings method: ``…/publishers/google/models/{m}:predict``.

The documented embeddings method for ``gemini-embedding-001`` and ``text-embedding-005``
(cloud.google.com/vertex-ai/generative-ai/docs/model-reference/text-embeddings-api): body
``{"instances": [{"content", "task_type"?, "title"?}], "parameters": {"outputDimensionality"?}}``,
answer ``{"predictions": [{"embeddings": {"values", "statistics": {"token_count", "truncated"}}}]}``.
``gemini-embedding-001`` takes one instance per request, the text-embedding models up to 250.
Auth, host and errors are the Vertex platform's (OAuth from Application Default Credentials).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import orjson

from gateway.dialects.base import UpstreamCall
from gateway.dialects.cloud import vertex_prefix
from gateway.dialects.embeddings import (
    Answer,
    EmbedPart,
    EmbedRequest,
    EmbedResult,
    Vector,
    bad_answer,
    cut_float_arrays,
    float_vector,
)
from gateway.errors import GatewayError

MAX_DIMENSIONS = {
    "gemini-embedding-001": 3072,
    "text-embedding-005": 768,
    "text-embedding-004": 768,
    "text-multilingual-embedding-002": 768,
}


class VertexWire:
    name = "vertex"
    takes_tokens = False

    def max_batch(self, model: str) -> int:
        return 1 if model.startswith("gemini-embedding") else 250

    def max_dimensions(self, model: str) -> int | None:
        return MAX_DIMENSIONS.get(model.split("@", 1)[0])

    def supports_dimensions(self, model: str) -> bool:
        return True

    def build(self, req: EmbedRequest, part: EmbedPart, model: str, settings: Any) -> UpstreamCall:
        instances = []
        for i, text in enumerate(part.inputs):
            instance: dict[str, Any] = {"content": text}
            if req.task_type is not None and req.task_type != "TASK_TYPE_UNSPECIFIED":
                instance["task_type"] = req.task_type
            title = part.titles[i] if part.titles else None
            if title:
                instance["title"] = title
            instances.append(instance)
        body: dict[str, Any] = {"instances": instances}
        if req.dimensions is not None:
            body["parameters"] = {"outputDimensionality": req.dimensions}
        path = f"{vertex_prefix(settings)}/publishers/google/models/{quote(model, safe='@')}:predict"
        return UpstreamCall(path, body)

    def decode(self, answer: Answer, part: EmbedPart, req: EmbedRequest) -> EmbedResult:
        tokens = 0
        counted = True
        try:
            body, arrays = cut_float_arrays(answer.body, b"values")  # floats stay bytes
            raw = iter(arrays)
            obj = orjson.loads(body)
            vectors: list[Vector] = []
            for prediction in obj["predictions"]:
                embeddings = prediction["embeddings"]
                vectors.append(float_vector(embeddings["values"], self.name, raw))
                count = (embeddings.get("statistics") or {}).get("token_count")
                if isinstance(count, (int, float)):
                    tokens += int(count)
                else:
                    counted = False
        except GatewayError:
            raise
        except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
            raise bad_answer(self.name, f"{type(exc).__name__} reading predictions[].embeddings.values") from None
        if len(vectors) != len(part.inputs):
            raise bad_answer(self.name, f"{len(vectors)} embeddings for {len(part.inputs)} inputs")
        return EmbedResult(vectors, tokens if counted else None)


WIRE = VertexWire()
