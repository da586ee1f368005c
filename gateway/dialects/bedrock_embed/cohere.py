"""Cohere embed (v3, v4) on Bedrock: up to 96 texts per InvokeModel call.

Body ``{"texts", "input_type", "embedding_types": ["float"], "output_dimension"?}``
(``output_dimension``: v4 only, 256 / 512 / 1024 / 1536); answer ``{"embeddings": {"float":
[[...]]}, "response_type": "embeddings_by_type"}`` (or ``{"embeddings": [[...]]}``, the
``embeddings_floats`` shape, without ``embedding_types``). ``input_type`` is required: from the
request's task type (Gemini's vocabulary), ``search_document`` when none was given. The input
token count comes in Bedrock's ``X-Amzn-Bedrock-Input-Token-Count`` header.
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
    Vector,
    bad_answer,
    float_vector,
)
from gateway.errors import GatewayError

# Gemini's task type -> Cohere's input_type
INPUT_TYPES = {
    "RETRIEVAL_QUERY": "search_query",
    "QUESTION_ANSWERING": "search_query",
    "FACT_VERIFICATION": "search_query",
    "CODE_RETRIEVAL_QUERY": "search_query",
    "RETRIEVAL_DOCUMENT": "search_document",
    "SEMANTIC_SIMILARITY": "clustering",
    "CLASSIFICATION": "classification",
    "CLUSTERING": "clustering",
}
DEFAULT_INPUT_TYPE = "search_document"


def _v4(model: str) -> bool:
    return "embed-v4" in model


class CohereWire:
    name = "bedrock-cohere"
    takes_tokens = False

    def max_batch(self, model: str) -> int:
        return 96

    def max_dimensions(self, model: str) -> int | None:
        if _v4(model):
            return 1536
        return 384 if "light" in model else 1024

    def supports_dimensions(self, model: str) -> bool:
        return _v4(model)

    def build(self, req: EmbedRequest, part: EmbedPart, model: str, settings: Any) -> UpstreamCall:
        body: dict[str, Any] = {
            "texts": part.inputs,
            "input_type": INPUT_TYPES.get(req.task_type or "", DEFAULT_INPUT_TYPE),
            "embedding_types": ["float"],
        }
        if req.dimensions is not None and _v4(model):
            body["output_dimension"] = req.dimensions
        return UpstreamCall(bedrock_model_path(model, stream=False), body)

    def decode(self, answer: Answer, part: EmbedPart, req: EmbedRequest) -> EmbedResult:
        try:
            obj = orjson.loads(answer.body)
            embeddings = obj["embeddings"]
            if isinstance(embeddings, dict):
                embeddings = embeddings["float"]
            vectors: list[Vector] = [float_vector(v, self.name) for v in embeddings]
        except GatewayError:
            raise
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise bad_answer(self.name, f"{type(exc).__name__} reading embeddings") from None
        if len(vectors) != len(part.inputs):
            raise bad_answer(self.name, f"{len(vectors)} embeddings for {len(part.inputs)} texts")
        return EmbedResult(vectors, header_tokens(answer.headers))


WIRE = CohereWire()
