"""A loopback double of Azure OpenAI, with a managed-identity token endpoint for Microsoft Entra ID.

Model routes: ``/openai/deployments/{d}/chat/completions?api-version=…``,
``/openai/responses?api-version=…`` and the v1 API's ``/openai/v1/chat/completions`` /
``/openai/v1/responses``. Each checks the ``api-key`` header (the configured key) or the bearer
(a token this double issued and that has not expired), the api-version, and that the body's
``model`` is the deployment; it then maps the deployment back to its scenario model
(``deployments``: deployment → model) and answers from ``captures/`` through ``FakeUpstream``.

Chat streams carry Azure's quirks: a first chunk with ``choices: []`` and
``prompt_filter_results``, a chunk with only ``content_filter_results`` (no ``delta``) after the
first. ``content_filter``: a stream that Azure's filter stops (``finish_reason: "content_filter"``).

Entra ID: ``GET /msi/token`` is App Service's managed-identity endpoint (``IDENTITY_ENDPOINT`` /
``IDENTITY_HEADER``), which ``DefaultAzureCredential`` reaches over plain http; it checks the
``X-IDENTITY-HEADER`` secret and the resource, and issues tokens living ``token_seconds``. ``force_401 = n``: the next n bearer calls revoke their
token and answer 401.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import orjson

from tests.support.fake_upstream import FakeUpstream, read_request

RESOURCE = "https://cognitiveservices.azure.com"
FILTERS = {
    "hate": {"filtered": False, "severity": "safe"},
    "self_harm": {"filtered": False, "severity": "safe"},
    "sexual": {"filtered": False, "severity": "safe"},
    "violence": {"filtered": False, "severity": "safe"},
}
PREAMBLE = {
    "choices": [],
    "created": 0,
    "id": "",
    "model": "",
    "object": "",
    "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": FILTERS}],
}
FILTER_ONLY = {
    "choices": [
        {
            "content_filter_offsets": {"check_offset": 0, "start_offset": 0, "end_offset": 40},
            "content_filter_results": FILTERS,
            "finish_reason": None,
            "index": 0,
        }
    ],
    "created": 1,
    "id": "chatcmpl-azure",
    "model": "gpt-4.1-2025-04-14",
    "object": "chat.completion.chunk",
}
DENIED = {
    "error": {
        "code": "401",
        "message": "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource.",
    }
}


def _chunk(obj: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def filtered_stream(model: str) -> bytes:
    """Azure's filter stopping an answer: some text, then ``finish_reason: "content_filter"``."""
    base = {"id": "chatcmpl-azure", "object": "chat.completion.chunk", "created": 1, "model": model}
    return (
        _chunk(PREAMBLE)
        + _chunk(
            {
                **base,
                "choices": [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": "Partial "},
                        "finish_reason": None,
                        "content_filter_results": {},
                    }
                ],
            }
        )
        + _chunk(
            {
                **base,
                "choices": [
                    {
                        "index": 0,
                        "delta": {},
                        "finish_reason": "content_filter",
                        "content_filter_results": {**FILTERS, "violence": {"filtered": True, "severity": "high"}},
                    }
                ],
            }
        )
        + _chunk({**base, "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10}})
        + b"data: [DONE]\n\n"
    )


@dataclass
class AzureDouble:
    api_key: str
    identity_header: str
    api_version: str
    deployments: dict[str, str] = field(default_factory=dict)  # deployment -> model (scenario)
    token_seconds: int = 3600
    port: int = 0
    upstream: FakeUpstream = field(default_factory=FakeUpstream)
    tokens: dict[str, float] = field(default_factory=dict)
    issued: int = 0
    seen: list[dict[str, Any]] = field(default_factory=list)  # path, query, auth kind, body model
    used: list[str] = field(default_factory=list)  # the bearer of every model call
    force_401: int = 0  # the next n bearer calls revoke their token and answer 401

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        raw = await read_request(scope, receive, send)
        if raw is None:
            return
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        query = {k: v[0] for k, v in parse_qs(scope.get("query_string", b"").decode()).items()}
        if scope["path"] == "/msi/token":
            await self._msi(headers, query, send)
            return
        bearer = headers.get("authorization", "").removeprefix("Bearer ")
        if bearer:
            self.used.append(bearer)
        if bearer in self.tokens and self.force_401:
            self.force_401 -= 1
            self.tokens[bearer] = 0  # revoked
        if headers.get("api-key") == self.api_key:
            how = "api-key"
        elif self.tokens.get(bearer, 0) > time.time():
            how = "bearer"
        else:
            await _json(send, 401, DENIED)
            return
        body = orjson.loads(raw) if raw else {}
        path = scope["path"]
        self.seen.append({"path": path, "query": query, "auth": how, "model": body.get("model"), "headers": headers})
        v1 = path.startswith("/openai/v1/")
        if not v1 and query.get("api-version") != self.api_version:
            await _json(send, 404, {"error": {"code": "404", "message": "Resource not found"}})
            return
        if path.startswith("/openai/deployments/"):
            name = path.split("/")[3]
            if body.get("model") not in (None, name):
                await _json(
                    send,
                    400,
                    {
                        "error": {
                            "code": "400",
                            "message": f"model {body.get('model')!r} is not the deployment {name!r}",
                        }
                    },
                )
                return
        else:
            name = str(body.get("model"))
        model = self.deployments.get(name)
        if model is None:
            await _json(
                send,
                404,
                {
                    "error": {
                        "code": "DeploymentNotFound",
                        "message": f"The API deployment for this resource does not exist: {name}",
                    }
                },
            )
            return
        if model == "content_filter":
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
            )
            await send({"type": "http.response.body", "body": filtered_stream(model)})
            return
        inner = {**scope, "path": "/chat/completions" if path.endswith("/chat/completions") else "/responses"}
        wrapped = _with_quirks(send) if inner["path"] == "/chat/completions" else send
        await self.upstream(inner, _replay(orjson.dumps({**body, "model": model})), wrapped)

    async def _msi(self, headers: dict[str, str], query: dict[str, str], send: Any) -> None:
        if headers.get("x-identity-header") != self.identity_header or query.get("resource") != RESOURCE:
            await _json(send, 400, {"error": "invalid_request", "error_description": "bad identity header or resource"})
            return
        token = f"eyJ0eXAi.double-{self.issued}-{secrets.token_hex(16)}"
        self.issued += 1
        expires_on = int(time.time()) + self.token_seconds
        self.tokens[token] = expires_on
        await _json(
            send,
            200,
            {"access_token": token, "expires_on": str(expires_on), "resource": RESOURCE, "token_type": "Bearer"},
        )


def _replay(raw: bytes) -> Any:
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": raw, "more_body": False}
        return {"type": "http.disconnect"}

    return receive


def _with_quirks(send: Any) -> Any:
    """``send`` with Azure's preamble chunk first and a filter-only chunk after the first frame."""
    pending: bytes | None = b""  # the start of the body, held until its first frame is complete

    async def wrapped(message: dict[str, Any]) -> None:
        nonlocal pending
        if message["type"] == "http.response.body" and pending is not None:
            pending += message.get("body", b"")
            if b"\n\n" not in pending and message.get("more_body"):
                return
            cut = pending.index(b"\n\n") + 2 if b"\n\n" in pending else len(pending)
            message = {**message, "body": _chunk(PREAMBLE) + pending[:cut] + _chunk(FILTER_ONLY) + pending[cut:]}
            pending = None
        await send(message)

    return wrapped


async def _json(send: Any, status: int, body: Any) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": orjson.dumps(body)})
