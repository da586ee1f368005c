"""The Gemini API's embeddings wire format: ``:embedContent`` and ``:batchEmbedContents``.

Callers: ``POST /v1beta/models/{model}:embedContent`` ``{content: {parts: [{text}]}, taskType?,
title?, outputDimensionality?}`` → ``{"embedding": {"values": [...]}}``, and
``:batchEmbedContents`` ``{requests: [{model, content, taskType?, title?, outputDimensionality?}]}``
→ ``{"embeddings": [{"values": [...]}]}``. google-genai's ``embed_content`` asks for
``batchEmbedContents`` even for one content (google/genai/models.py), so both are first-class.
A content's text parts are one input (joined by a newline, as the API embeds them together).

Upstream: always ``batchEmbedContents`` (one call for up to ``MAX_BATCH`` inputs). The Gemini API
reports no token count for embeddings: the relay estimates it and marks the record.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import orjson

from gateway.dialects.base import UpstreamCall
from gateway.dialects.embeddings import (
    TASK_TYPES,
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

MAX_BATCH = 100  # requests per batchEmbedContents call (the API's limit)
MAX_DIMENSIONS = {"gemini-embedding-001": 3072, "text-embedding-004": 768, "embedding-001": 768}


def _invalid(message: str, param: str) -> GatewayError:
    return GatewayError("invalid_request", message, 400, param=param)


def _text_of(content: Any, where: str) -> str:
    if not isinstance(content, dict) or not isinstance(content.get("parts"), list) or not content["parts"]:
        raise _invalid(f"{where}.parts must be a non-empty array", f"{where}.parts")
    texts = []
    for i, part in enumerate(content["parts"]):
        text = part.get("text") if isinstance(part, dict) else None
        if not isinstance(text, str):
            raise _invalid(
                f"{where}.parts[{i}] must be a text part: only text is embedded through the gateway",
                f"{where}.parts[{i}]",
            )
        texts.append(text)
    joined = "\n".join(texts)
    if not joined:
        raise _invalid(f"{where} has no text to embed", f"{where}.parts")
    return joined


def _settings(item: dict[str, Any], where: str) -> tuple[str | None, int | None, str | None]:
    task = item.get("taskType")
    if task is not None and task not in TASK_TYPES:
        raise _invalid(f"{where}taskType {task!r} is not one of {', '.join(sorted(TASK_TYPES))}", f"{where}taskType")
    dims = item.get("outputDimensionality")
    if dims is not None and (type(dims) is not int or dims < 1):
        raise _invalid(
            f"{where}outputDimensionality must be a positive integer, got {dims!r}", f"{where}outputDimensionality"
        )
    title = item.get("title")
    if title is not None and not isinstance(title, str):
        raise _invalid(f"{where}title must be a string", f"{where}title")
    return task, dims, title


def parse_request(obj: dict[str, Any], model: str, batch: bool) -> EmbedRequest:
    """An ``embedContent`` (``batch`` False) or ``batchEmbedContents`` body as an ``EmbedRequest``."""
    model = model.removeprefix("models/")
    check_model_name(model)
    if not batch:
        task, dims, title = _settings(obj, "")
        text = _text_of(obj.get("content"), "content")
        return EmbedRequest(model, [text], False, dims, task, [title] if title else None, dialect="gemini")
    requests = obj.get("requests")
    if not isinstance(requests, list) or not requests:
        raise _invalid("requests must be a non-empty array", "requests")
    texts: list[str] = []
    titles: list[str | None] = []
    first: tuple[str | None, int | None] | None = None
    for i, item in enumerate(requests):
        if not isinstance(item, dict):
            raise _invalid(f"requests[{i}] must be an object", f"requests[{i}]")
        task, dims, title = _settings(item, f"requests[{i}].")
        if first is None:
            first = (task, dims)
        elif (task, dims) != first:
            raise _invalid(
                "every request of a batch must have the same taskType and outputDimensionality", f"requests[{i}]"
            )
        texts.append(_text_of(item.get("content"), f"requests[{i}].content"))
        titles.append(title)
    assert first is not None
    return EmbedRequest(model, texts, False, first[1], first[0], titles if any(titles) else None, dialect="gemini")


def encode_answer(result: EmbedResult, req: EmbedRequest, batch: bool) -> bytes:
    vectors = as_encoding(result.vectors, "float")
    if not batch:
        return orjson.dumps({"embedding": {"values": vectors[0]}})
    return orjson.dumps({"embeddings": [{"values": v} for v in vectors]})


class GeminiWire:
    """``POST /v1beta/models/{m}:batchEmbedContents`` on the Gemini API."""

    name = "gemini"
    takes_tokens = False

    def max_batch(self, model: str) -> int:
        return MAX_BATCH

    def max_dimensions(self, model: str) -> int | None:
        return MAX_DIMENSIONS.get(model)

    def supports_dimensions(self, model: str) -> bool:
        return True

    def build(self, req: EmbedRequest, part: EmbedPart, model: str, settings: Any) -> UpstreamCall:
        name = "models/" + model
        requests = []
        for i, text in enumerate(part.inputs):
            item: dict[str, Any] = {"model": name, "content": {"parts": [{"text": text}]}}
            if req.task_type is not None:
                item["taskType"] = req.task_type
            title = part.titles[i] if part.titles else None
            if title:
                item["title"] = title
            if req.dimensions is not None:
                item["outputDimensionality"] = req.dimensions
            requests.append(item)
        return UpstreamCall(f"/v1beta/models/{quote(model, safe='')}:batchEmbedContents", {"requests": requests})

    def decode(self, answer: Answer, part: EmbedPart, req: EmbedRequest) -> EmbedResult:
        try:
            body, arrays = cut_float_arrays(answer.body, b"values")  # floats stay bytes
            raw = iter(arrays)
            obj = orjson.loads(body)
            vectors: list[Vector] = [float_vector(e["values"], self.name, raw) for e in obj["embeddings"]]
        except GatewayError:
            raise
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise bad_answer(self.name, f"{type(exc).__name__} reading embeddings[].values") from None
        if len(vectors) != len(part.inputs):
            raise bad_answer(self.name, f"{len(vectors)} embeddings for {len(part.inputs)} inputs")
        usage = obj.get("usageMetadata")
        tokens = usage.get("promptTokenCount") if isinstance(usage, dict) else None
        return EmbedResult(vectors, tokens if type(tokens) is int else None)


WIRE = GeminiWire()
