"""A loopback double of every embeddings API the gateway speaks upstream, to the documented wire formats.

* OpenAI ``POST /v1/embeddings`` (``Authorization: Bearer``; ``encoding_format`` float / base64,
  ``dimensions``, token arrays; at most 2,048 inputs);
* Azure ``POST /openai/deployments/{d}/embeddings?api-version=`` (the ``api-key`` header, the
  version checked, the deployment mapped to its model);
* the Gemini API ``POST /v1beta/models/{m}:batchEmbedContents`` (``x-goog-api-key``; at most 100
  requests, ``outputDimensionality``; no token count, as the API reports none);
* Vertex ``…/publishers/google/models/{m}:predict`` behind ``VertexDouble`` (which verifies the
  OAuth token; pass this double as its ``upstream``): ``instances`` / ``parameters``, one instance
  for ``gemini-embedding-001``, 250 for the others;
* Bedrock InvokeModel bodies behind ``BedrockDouble`` (which verifies SigV4; set its
  ``invoke_handler`` to ``bedrock``): Titan (``inputText``, one per call) and Cohere (``texts``,
  at most 96, ``input_type`` required), the input token count in
  ``X-Amzn-Bedrock-Input-Token-Count``.

Every vector is ``vector(text, model, dims)``: deterministic, the model in its seed (vectors of
two models never match), every value exact in float32 (so base64 round trips are exact). Token
counts are the words of each text. Faults by upstream model name: ``…throttle_once`` (429 the
first time per model), ``…error_500`` (always 500), ``…slow`` (answers after 2 s), ``…short``
(OpenAI: one embedding fewer than asked); an input containing ``boom`` makes its call 500.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import math
from array import array
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote

import orjson

from tests.support.fake_upstream import read_request

OPENAI_KEY = "sk-upstream-embeddings-secret"
GEMINI_KEY = "gemini-upstream-embeddings-secret"
AZURE_KEY = "azure-upstream-embeddings-secret"
AZURE_VERSION = "2024-10-21"
DIMS = 12


def vector(text: str | list[int], model: str, dims: int | None = None) -> list[float]:
    seed = (model + "|" + (text if isinstance(text, str) else ",".join(map(str, text)))).encode()
    size = dims or DIMS
    digest = b"".join(hashlib.sha256(seed + bytes([i])).digest() for i in range(math.ceil(size / 32)))
    return [(b - 128) / 64 for b in digest[:size]]


def b64(values: list[float]) -> str:
    return base64.b64encode(array("f", values).tobytes()).decode()


def words(text: str | list[int]) -> int:
    return len(text) if isinstance(text, list) else len(text.split())


@dataclass
class EmbedDouble:
    deployments: dict[str, str] = field(default_factory=dict)  # Azure deployment -> model
    seen: list[dict[str, Any]] = field(default_factory=list)
    hits: dict[str, int] = field(default_factory=dict)

    def calls(self, api: str) -> list[dict[str, Any]]:
        return [s for s in self.seen if s["api"] == api]

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        raw = await read_request(scope, receive, send)
        if raw is None:
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        query = {k: v[0] for k, v in parse_qs(scope.get("query_string", b"").decode()).items()}
        path = scope["path"]
        body = orjson.loads(raw) if raw else {}
        if path == "/v1/embeddings":
            if headers.get("authorization") != f"Bearer {OPENAI_KEY}":
                await _json(send, 401, {"error": {"message": "Incorrect API key", "type": "invalid_request_error"}})
                return
            self.seen.append({"api": "openai", "path": path, "query": query, "headers": headers, "body": body})
            await self._openai(body, str(body.get("model")), send)
        elif path.startswith("/openai/deployments/") and path.endswith("/embeddings"):
            if headers.get("api-key") != AZURE_KEY:
                await _json(send, 401, {"error": {"code": "401", "message": "Access denied due to invalid key."}})
                return
            deployment = unquote(path.split("/")[3])
            self.seen.append({"api": "azure", "path": path, "query": query, "headers": headers, "body": body})
            if query.get("api-version") != AZURE_VERSION or deployment not in self.deployments:
                await _json(send, 404, {"error": {"code": "DeploymentNotFound", "message": "Resource not found"}})
                return
            await self._openai(body, self.deployments[deployment], send)
        elif path.startswith("/v1beta/models/") and path.endswith(":batchEmbedContents"):
            if headers.get("x-goog-api-key") != GEMINI_KEY:
                await _google(send, 400, "API key not valid. Please pass a valid API key.", "INVALID_ARGUMENT")
                return
            model = unquote(path[len("/v1beta/models/") : -len(":batchEmbedContents")])
            self.seen.append({"api": "gemini", "path": path, "query": query, "headers": headers, "body": body})
            await self._gemini(body, model, send)
        elif "/publishers/google/models/" in path and path.endswith(":predict"):
            model = unquote(path.split("/publishers/google/models/", 1)[1][: -len(":predict")])
            self.seen.append({"api": "vertex", "path": path, "query": query, "headers": headers, "body": body})
            await self._vertex(body, model, send)
        else:
            await _json(send, 404, {"error": {"message": f"no route {path}"}})

    def _fault(self, model: str, texts: list[Any]) -> str | None:
        self.hits[model] = self.hits.get(model, 0) + 1
        if "error_500" in model or any(isinstance(t, str) and "boom" in t for t in texts):
            return "500"
        if "throttle_once" in model and self.hits[model] == 1:
            return "429"
        return None

    async def _openai(self, body: dict[str, Any], model: str, send: Any) -> None:
        value = body.get("input")
        inputs = value if isinstance(value, list) and value and not isinstance(value[0], int) else [value]
        fault = self._fault(model, inputs)
        if fault == "429":
            await _json(
                send,
                429,
                {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}},
                [(b"retry-after-ms", b"10")],
            )
            return
        if fault:
            await _json(send, 500, {"error": {"message": "The server had an error", "type": "server_error"}})
            return
        if len(inputs) > 2048:
            await _json(send, 400, {"error": {"message": "'$.input' is invalid", "type": "invalid_request_error"}})
            return
        if "slow" in model:
            await asyncio.sleep(2)
        dims = body.get("dimensions")
        base = body.get("encoding_format") == "base64"
        data = []
        for i, text in enumerate(inputs[:-1] if "short" in model else inputs):
            values = vector(text, model, dims)
            data.append({"object": "embedding", "index": i, "embedding": b64(values) if base else values})
        tokens = sum(words(t) for t in inputs)
        await _json(
            send,
            200,
            {
                "object": "list",
                "data": data,
                "model": model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )

    async def _gemini(self, body: dict[str, Any], model: str, send: Any) -> None:
        requests = body.get("requests") or []
        texts = ["\n".join(p["text"] for p in r["content"]["parts"]) for r in requests]
        fault = self._fault(model, texts)
        if fault:
            status = "RESOURCE_EXHAUSTED" if fault == "429" else "INTERNAL"
            await _google(send, int(fault), "Resource has been exhausted" if fault == "429" else "Internal", status)
            return
        if len(requests) > 100 or any(r.get("model") != f"models/{model}" for r in requests):
            await _google(send, 400, "at most 100 requests, each naming this model", "INVALID_ARGUMENT")
            return
        out = [{"values": vector(t, model, r.get("outputDimensionality"))} for t, r in zip(texts, requests)]
        await _json(send, 200, {"embeddings": out})

    async def _vertex(self, body: dict[str, Any], model: str, send: Any) -> None:
        instances = body.get("instances") or []
        texts = [i["content"] for i in instances]
        fault = self._fault(model, texts)
        if fault:
            await _google(send, int(fault), "Quota exceeded" if fault == "429" else "Internal", "INTERNAL")
            return
        if len(instances) > (1 if model.startswith("gemini-embedding") else 250):
            await _google(send, 400, "too many instances for this model", "INVALID_ARGUMENT")
            return
        dims = (body.get("parameters") or {}).get("outputDimensionality")
        predictions = [
            {
                "embeddings": {
                    "values": vector(t, model, dims),
                    "statistics": {"truncated": False, "token_count": words(t)},
                }
            }
            for t in texts
        ]
        await _json(
            send, 200, {"predictions": predictions, "metadata": {"billableCharacterCount": sum(map(len, texts))}}
        )

    async def bedrock(self, body: dict[str, Any], model: str, send: Any) -> None:
        """BedrockDouble's ``invoke_handler``: Titan and Cohere bodies (SigV4 already verified)."""
        self.seen.append({"api": "bedrock", "model": model, "body": body})
        texts = body.get("texts") if "cohere" in model else [body.get("inputText")]
        fault = self._fault(model, texts or [])
        if fault:
            error = "ThrottlingException" if fault == "429" else "InternalServerException"
            await _json(
                send, int(fault), {"message": "Too many requests" if fault == "429" else "Internal"}, error=error
            )
            return
        if "cohere" in model:
            if not isinstance(texts, list) or not 1 <= len(texts) <= 96 or "input_type" not in body:
                await _json(send, 400, {"message": "Malformed input request"}, error="ValidationException")
                return
            dims = body.get("output_dimension")
            tokens = sum(words(t) for t in texts)
            answer: dict[str, Any] = {
                "id": "emb-1",
                "texts": texts,
                "embeddings": {"float": [vector(t, model, dims) for t in texts]},
                "response_type": "embeddings_by_type",
            }
            await _json(send, 200, answer, [(b"x-amzn-bedrock-input-token-count", str(tokens).encode())])
            return
        text = body.get("inputText")
        if not isinstance(text, str) or set(body) - {"inputText", "dimensions", "normalize", "embeddingTypes"}:
            await _json(send, 400, {"message": "Malformed input request"}, error="ValidationException")
            return
        await _json(
            send,
            200,
            {"embedding": vector(text, model, body.get("dimensions")), "inputTextTokenCount": words(text)},
            [(b"x-amzn-bedrock-input-token-count", str(words(text)).encode())],
        )


async def _json(
    send: Any, status: int, body: Any, headers: list[tuple[bytes, bytes]] | None = None, error: str | None = None
) -> None:
    extra = list(headers or [])
    if error is not None:
        extra.append((b"x-amzn-errortype", f"{error}:http://internal.amazon.com/coral/com.amazon.bedrock/".encode()))
    await send(
        {"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json"), *extra]}
    )
    await send({"type": "http.response.body", "body": orjson.dumps(body)})


async def _google(send: Any, status: int, message: str, code: str) -> None:
    await _json(send, status, {"error": {"code": status, "message": message, "status": code}})
