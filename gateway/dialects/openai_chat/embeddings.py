"""OpenAI's embeddings wire format: ``POST /v1/embeddings`` for callers, ``POST {base_url}/embeddings``
(and Azure's deployment route) for upstreams.

Request ``{model, input: str | [str] | [int] | [[int]], dimensions?, encoding_format?: "float" |
"base64", user?}``; answer ``{"object": "list", "data": [{"object": "embedding", "index",
"embedding"}], "model", "usage": {"prompt_tokens", "total_tokens"}}``. The ``openai`` SDK asks for
``base64`` unless told otherwise and decodes it itself (openai/lib/_parsing/_embeddings.py): the
default must work, so base64 is a first-class encoding here, passed through as the upstream's
string when the upstream speaks this wire too.

The same wire serves OpenAI-compatible servers (vLLM, Ollama, Together, Voyage's OpenAI-style
endpoint): any provider of dialect ``openai-chat``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import orjson

from gateway.dialects.base import UpstreamCall
from gateway.dialects.cloud import azure_deployment, azure_on_v1
from gateway.dialects.embeddings import (
    Answer,
    EmbedPart,
    EmbedRequest,
    EmbedResult,
    Vector,
    as_encoding,
    bad_answer,
    cut_float_arrays,
    float_vector,
)
from gateway.dialects.validation import check_model_name
from gateway.errors import GatewayError

MAX_BATCH = 2048  # inputs per request (the API's limit)
# the largest output of OpenAI's own models; others (compatible servers): unknown, the upstream judges
MAX_DIMENSIONS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}
FIXED = ("text-embedding-ada-002",)  # no ``dimensions`` parameter


def _invalid(message: str, param: str = "input") -> GatewayError:
    return GatewayError("invalid_request", message, 400, param=param)


def _token_array(value: list[Any], where: str) -> list[int]:
    if not value:
        raise _invalid(f"{where} is an empty token array")
    if any(type(t) is not int or t < 0 for t in value):
        raise _invalid(f"{where} must hold only non-negative integer token ids")
    return value


def parse_request(obj: dict[str, Any]) -> EmbedRequest:
    """The caller's body as an ``EmbedRequest``; a 400 naming the field for anything the API refuses."""
    model = obj.get("model")
    if not isinstance(model, str) or not model:
        raise _invalid("model is required (a string)", "model")
    check_model_name(model)
    if "input" not in obj:
        raise _invalid("input is required: a string, an array of strings, or token arrays")
    value = obj["input"]
    inputs: list[Any]
    tokens = False
    if isinstance(value, str):
        inputs = [value]
    elif isinstance(value, list):
        if not value:
            raise _invalid("input must not be an empty array")
        first = value[0]
        if type(first) is int:
            inputs, tokens = [_token_array(value, "input")], True
        elif isinstance(first, list):
            if any(not isinstance(v, list) for v in value):
                raise _invalid("input mixes token arrays with other values")
            inputs = [_token_array(v, f"input[{i}]") for i, v in enumerate(value)]
            tokens = True
        else:
            for i, v in enumerate(value):
                if not isinstance(v, str):
                    raise _invalid(f"input[{i}] must be a string, got {type(v).__name__}")
            inputs = value
    else:
        raise _invalid(f"input must be a string or an array, got {type(value).__name__}")
    if not tokens:
        empty = next((i for i, t in enumerate(inputs) if not t), None)
        if empty is not None:
            raise _invalid("input must not be an empty string" + (f" (input[{empty}])" if len(inputs) > 1 else ""))
    dimensions = obj.get("dimensions")
    if dimensions is not None and (type(dimensions) is not int or dimensions < 1):
        raise _invalid(f"dimensions must be a positive integer, got {dimensions!r}", "dimensions")
    encoding = obj.get("encoding_format", "float")
    if encoding is None:
        encoding = "float"
    if encoding not in ("float", "base64"):
        raise _invalid(f"encoding_format must be 'float' or 'base64', got {encoding!r}", "encoding_format")
    user = obj.get("user")
    if user is not None and not isinstance(user, str):
        raise _invalid("user must be a string", "user")
    return EmbedRequest(model, inputs, tokens, dimensions, encoding=encoding, user=user, dialect="openai-chat")


def encode_answer(result: EmbedResult, req: EmbedRequest) -> bytes:
    vectors = as_encoding(result.vectors, req.encoding)
    tokens = result.input_tokens or 0
    return orjson.dumps(
        {
            "object": "list",
            "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
            "model": req.model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
    )


class OpenAIWire:
    """``POST {base_url}/embeddings``: the OpenAI API and the servers that copy it."""

    name = "openai"
    takes_tokens = True

    def max_batch(self, model: str) -> int:
        return MAX_BATCH

    def max_dimensions(self, model: str) -> int | None:
        return MAX_DIMENSIONS.get(model)

    def supports_dimensions(self, model: str) -> bool:
        return model not in FIXED

    def body(self, req: EmbedRequest, part: EmbedPart, model: str) -> dict[str, Any]:
        body: dict[str, Any] = {"model": model, "input": part.inputs}
        if req.dimensions is not None:
            body["dimensions"] = req.dimensions
        # the caller's encoding: a base64 answer comes back as the string the caller gets
        body["encoding_format"] = req.encoding
        if req.user is not None:
            body["user"] = req.user
        return body

    def build(self, req: EmbedRequest, part: EmbedPart, model: str, settings: Any) -> UpstreamCall:
        return UpstreamCall("/embeddings", self.body(req, part, model))

    def decode(self, answer: Answer, part: EmbedPart, req: EmbedRequest) -> EmbedResult:
        try:
            body, arrays = cut_float_arrays(answer.body, b"embedding")  # floats stay bytes
            raw = iter(arrays)
            obj = orjson.loads(body)
            data = obj["data"]
            vectors: list[Vector] = [None] * len(data)  # type: ignore[list-item]
            for position, item in enumerate(data):
                index = item.get("index", position)
                vector = item["embedding"]
                vectors[index] = vector if isinstance(vector, str) and vector else float_vector(vector, self.name, raw)
        except GatewayError:
            raise
        except (orjson.JSONDecodeError, KeyError, TypeError, IndexError, AttributeError) as exc:
            raise bad_answer(self.name, f"{type(exc).__name__} reading data[].embedding") from None
        if len(vectors) != len(part.inputs) or any(v is None for v in vectors):
            raise bad_answer(self.name, f"{len(data)} embeddings for {len(part.inputs)} inputs")
        usage = obj.get("usage")
        tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        return EmbedResult(vectors, tokens if type(tokens) is int else None, obj.get("model"))


class AzureWire(OpenAIWire):
    """Azure OpenAI: the deployment's route ``/openai/deployments/{d}/embeddings?api-version=``, or
    ``/openai/v1/embeddings`` with the deployment as ``model`` on the v1 API."""

    name = "azure"

    def build(self, req: EmbedRequest, part: EmbedPart, model: str, settings: Any) -> UpstreamCall:
        deployment = azure_deployment(settings, model)
        body = self.body(req, part, deployment)
        version = settings.api_version or ""
        if azure_on_v1(settings):
            params = {} if version == "v1" else {"api-version": version}
            return UpstreamCall("/openai/v1/embeddings", body, params)
        return UpstreamCall(
            f"/openai/deployments/{quote(deployment, safe='')}/embeddings", body, {"api-version": version}
        )


WIRE = OpenAIWire()
AZURE = AzureWire()
