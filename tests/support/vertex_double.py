"""A loopback double of Vertex AI: Google's OAuth token endpoint and the Gemini / Claude model routes.

Token endpoint (``POST /token``): takes the service-account JWT bearer grant and *verifies* it:
RS256 signature against the test key's public half, ``iss`` = the service account's email,
``aud`` = Google's token endpoint (what google-auth signs for, wherever ``token_uri`` points), ``scope`` = cloud-platform, ``iat``/``exp`` current. It issues tokens
that live ``token_seconds`` (short, so the gateway refreshes during a test).

Model routes (``/v1/projects/{p}/locations/{l}/publishers/{google|anthropic}/models/{m}:{method}``,
and ``/v1beta1/projects/{p}/locations/{l}/interactions[/{id}]``)
refuse a missing, unknown, expired or revoked bearer with Google's 401, check the project and
location, check the Claude body (``anthropic_version: vertex-2023-10-16``, no ``model``, ``stream``
matching the method), then answer from ``captures/`` through ``FakeUpstream`` (the scenario in the
model name, as there). Claude streams get a Vertex-only event (``vertex_event``) after the first
frame; Claude's ``error_429`` is Vertex's own quota error, in Google's format.

``force_401 = n``: the next n model calls revoke the token they carry and answer 401.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import jwt
import orjson

from tests.support.fake_upstream import COUNTED_TOKENS, FakeUpstream, read_request

SCOPE = "https://www.googleapis.com/auth/cloud-platform"
AUDIENCE = "https://oauth2.googleapis.com/token"  # google-auth signs for Google's endpoint, wherever token_uri points
VERTEX_EVENT = b'event: vertex_event\ndata: {"type": "vertex_event", "note": "a Vertex-only event"}\n\n'
QUOTA_429 = {
    "error": {
        "code": 429,
        "message": "Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model with base model: anthropic-claude. Please submit a quota increase request.",
        "status": "RESOURCE_EXHAUSTED",
    }
}
UNAUTHENTICATED = {
    "error": {
        "code": 401,
        "message": "Request had invalid authentication credentials. Expected OAuth 2 access token.",
        "status": "UNAUTHENTICATED",
    }
}


@dataclass
class VertexDouble:
    public_key: Any  # the service account's public key (cryptography), to verify assertions
    client_email: str
    project: str
    location: str
    token_seconds: int = 2
    port: int = 0
    upstream: FakeUpstream = field(default_factory=FakeUpstream)
    tokens: dict[str, float] = field(default_factory=dict)  # token -> expiry (epoch)
    revoked: set[str] = field(default_factory=set)
    issued: int = 0
    refused_assertions: list[str] = field(default_factory=list)
    used: list[str] = field(default_factory=list)  # the bearer of every model call, in order
    paths: list[str] = field(default_factory=list)  # the raw path of every model call
    unauthorized: int = 0  # model calls answered 401
    force_401: int = 0
    token_delay: float = 0.0  # seconds the token endpoint takes (a slow metadata server)

    @property
    def token_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/token"

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        raw = await read_request(scope, receive, send)
        if raw is None:
            return
        if scope["path"] == "/token":
            await self._token(raw, send)
            return
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        bearer = headers.get("authorization", "").removeprefix("Bearer ")
        self.used.append(bearer)
        self.paths.append(scope["raw_path"].decode())
        if self.force_401 and bearer in self.tokens:
            self.force_401 -= 1
            self.revoked.add(bearer)
        if bearer not in self.tokens or bearer in self.revoked or self.tokens[bearer] < time.time():
            self.unauthorized += 1
            await _json(send, 401, UNAUTHENTICATED)
            return
        await self._model(scope, raw, receive, send)

    async def _token(self, raw: bytes, send: Any) -> None:
        form = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
        if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
            await _json(send, 400, {"error": "unsupported_grant_type"})
            return
        try:
            claims = jwt.decode(
                form.get("assertion", ""), self.public_key, algorithms=["RS256"], audience=AUDIENCE, leeway=30
            )
            if claims.get("iss") != self.client_email or SCOPE not in str(claims.get("scope", "")).split():
                raise jwt.InvalidTokenError(f"iss {claims.get('iss')!r} / scope {claims.get('scope')!r}")
        except jwt.InvalidTokenError as exc:
            self.refused_assertions.append(str(exc))
            await _json(send, 400, {"error": "invalid_grant", "error_description": "Invalid JWT Signature."})
            return
        await asyncio.sleep(self.token_delay)
        token = f"ya29.double-{self.issued}-{secrets.token_hex(16)}"
        self.issued += 1
        self.tokens[token] = time.time() + self.token_seconds
        await _json(send, 200, {"access_token": token, "expires_in": self.token_seconds, "token_type": "Bearer"})

    async def _model(self, scope: dict[str, Any], raw: bytes, receive: Any, send: Any) -> None:
        path = scope["path"]
        interactions = f"/v1beta1/projects/{self.project}/locations/{self.location}/interactions"
        if path.startswith(interactions):  # the Interactions API: the Gemini API's, under the project
            await self.upstream(
                {**scope, "path": "/v1beta/interactions" + path[len(interactions) :]}, _replay(raw), send
            )
            return
        prefix = f"/v1/projects/{self.project}/locations/{self.location}/publishers/"
        if not path.startswith(prefix) or ":" not in path:
            await _json(send, 404, {"error": {"code": 404, "message": f"no route {path}", "status": "NOT_FOUND"}})
            return
        publisher, _, rest = path[len(prefix) :].partition("/models/")
        model, _, method = rest.rpartition(":")
        body = orjson.loads(raw) if raw else {}
        if publisher == "google":
            await self.upstream(scope, _replay(raw), send)
            return
        if model == "count-tokens" and method == "rawPredict":  # Claude's counting route: the model in the body
            ok = body.get("anthropic_version") == "vertex-2023-10-16" and isinstance(body.get("model"), str)
            await _json(
                send,
                200 if ok else 400,
                {"input_tokens": COUNTED_TOKENS}
                if ok
                else {"error": {"code": 400, "message": "bad count", "status": "INVALID_ARGUMENT"}},
            )
            return
        problem = None
        if "model" in body:
            problem = "model is not allowed in the body (it is in the URL)"
        elif body.get("anthropic_version") != "vertex-2023-10-16":
            problem = f"anthropic_version must be vertex-2023-10-16, got {body.get('anthropic_version')!r}"
        elif method not in ("streamRawPredict", "rawPredict") or bool(body.get("stream")) != (
            method == "streamRawPredict"
        ):
            problem = f"method {method} with stream={body.get('stream')!r}"
        if problem is not None:
            await _json(send, 400, {"error": {"code": 400, "message": problem, "status": "INVALID_ARGUMENT"}})
            return
        if model.endswith("error_429") or model == "end_turn":
            await _json(send, 429, QUOTA_429)
            return
        body.pop("anthropic_version")
        inner = {**scope, "path": "/v1/messages"}
        await self.upstream(inner, _replay(orjson.dumps({"model": model, **body})), _with_vertex_event(send))


def _replay(raw: bytes) -> Any:
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": raw, "more_body": False}
        return {"type": "http.disconnect"}

    return receive


def _with_vertex_event(send: Any) -> Any:
    """``send`` with Vertex's extra event after the first frame of a stream."""
    done = False

    async def wrapped(message: dict[str, Any]) -> None:
        nonlocal done
        body = message.get("body", b"")
        if message["type"] == "http.response.body" and not done and b"\n\n" in body:
            done = True
            cut = body.index(b"\n\n") + 2
            message = {**message, "body": body[:cut] + VERTEX_EVENT + body[cut:]}
        await send(message)

    return wrapped


async def _json(send: Any, status: int, body: Any) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": orjson.dumps(body)})
