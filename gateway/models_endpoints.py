"""``GET /v1/models``, ``GET /v1/models/{id}`` and the Gemini ``/v1beta/models`` in each SDK's shape.

``/v1/models`` is shared by three SDKs, so the caller is told apart by what its SDK always sends:
``anthropic-version`` (Anthropic), a Google key header / ``?key=`` / ``x-goog-api-client``
(google-genai on ``/v1``), anything else is OpenAI. The models listed are the route names without
wildcards; one asked for by name is found if it routes (globs and ``provider/model`` too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.dialects.registry import codec_for
from gateway.errors import GatewayError

if TYPE_CHECKING:
    from gateway.state import GatewayState


def caller_dialect(request: Request) -> str:
    headers = request.headers
    if "anthropic-version" in headers:
        return "anthropic"
    if request.url.path.startswith("/v1beta/") or "x-goog-api-key" in headers or "x-goog-api-client" in headers or "key" in request.query_params:
        return "gemini"
    return "openai-chat"


def listed_models(state: GatewayState) -> list[str]:
    names = [r.model for r in state.settings.routes if not any(c in r.model for c in "*?[")]
    return list(dict.fromkeys(names))


def _anthropic(name: str) -> dict[str, Any]:
    return {"type": "model", "id": name, "display_name": name, "created_at": "2025-01-01T00:00:00Z"}


def _openai(name: str, created: int) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": created, "owned_by": "gateway"}


def _gemini(name: str) -> dict[str, Any]:
    return {
        "name": f"models/{name}",
        "version": "gateway",
        "displayName": name,
        "inputTokenLimit": 1048576,
        "outputTokenLimit": 65536,
        "supportedGenerationMethods": ["generateContent", "streamGenerateContent", "countTokens"],
    }


class ModelsEndpoints:
    def __init__(self, state: GatewayState) -> None:
        self.state = state

    def _error(self, dialect: str, err: GatewayError) -> Response:
        status, body = codec_for(dialect).render_error(err)
        return JSONResponse(body, status)

    async def list(self, request: Request) -> Response:
        dialect = caller_dialect(request)
        try:
            self.state.auth.authenticate(request.scope, dict(request.query_params))
        except GatewayError as err:
            return self._error(dialect, err)
        names = listed_models(self.state)
        if dialect == "anthropic":
            return JSONResponse({"data": [_anthropic(n) for n in names], "has_more": False, "first_id": names[0] if names else None, "last_id": names[-1] if names else None})
        if dialect == "gemini":
            return JSONResponse({"models": [_gemini(n) for n in names]})
        return JSONResponse({"object": "list", "data": [_openai(n, int(self.state.started)) for n in names]})

    async def get(self, request: Request) -> Response:
        dialect = caller_dialect(request)
        name = request.path_params["target"]
        if name.startswith("models/"):
            name = name[len("models/"):]
        try:
            self.state.auth.authenticate(request.scope, dict(request.query_params))
            self.state.router.resolve(name)  # unknown: 404 in the caller's shape
        except GatewayError as err:
            return self._error(dialect, err)
        if dialect == "anthropic":
            return JSONResponse(_anthropic(name))
        if dialect == "gemini":
            return JSONResponse(_gemini(name))
        return JSONResponse(_openai(name, int(self.state.started)))
