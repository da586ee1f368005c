"""``GET /v1/models``, ``GET /v1/models/{id}`` and the Gemini ``/v1beta/models`` in each SDK's shape.

``/v1/models`` is shared by three SDKs, so the caller is told apart by what its SDK always sends
(``Codec.recognises``: ``anthropic-version`` is Anthropic, a Google key header / ``?key=`` /
``x-goog-api-client`` google-genai on ``/v1``); the shapes are the codecs' (``Codec.models``), and a
caller whose dialect has none (or that nobody recognises) gets OpenAI's. The models listed are the route names without
wildcards; one asked for by name is found if it routes (globs and ``provider/model`` too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.dialects.base import ModelListing
from gateway.dialects.registry import FALLBACK_CALLER, codec_for, guess_caller
from gateway.errors import GatewayError

if TYPE_CHECKING:
    from gateway.asgi import Scope
    from gateway.relay.state import GatewayState


def caller_dialect(request: Request) -> str:
    """The caller's dialect, if it has a model-list shape (else the fallback's, OpenAI)."""
    names = {k.encode("latin-1") for k in request.headers}
    dialect = guess_caller(request.url.path, names, request.query_params.keys())
    return dialect if codec_for(dialect).models is not None else FALLBACK_CALLER


def _listing(dialect: str) -> ModelListing:
    listing = codec_for(dialect).models
    assert listing is not None  # caller_dialect picks only dialects with one
    return listing


def listed_models(state: GatewayState) -> list[str]:
    names = [r.model for r in state.settings.routes if not any(c in r.model for c in "*?[")]
    return list(dict.fromkeys(names))


class ModelsEndpoints:
    def __init__(self, state: GatewayState) -> None:
        self.state = state

    def _error(self, dialect: str, err: GatewayError) -> Response:
        status, body = codec_for(dialect).render_error(err)
        return JSONResponse(body, status)

    async def list(self, request: Request) -> Response:
        dialect = caller_dialect(request)
        try:
            await self.state.auth.authenticate(
                cast("Scope", request.scope), dict(request.query_params)
            )  # (the ASGI dict Starlette types a MutableMapping)
        except GatewayError as err:
            return self._error(dialect, err)
        return JSONResponse(_listing(dialect).listing(listed_models(self.state), int(self.state.started)))

    async def get(self, request: Request) -> Response:
        dialect = caller_dialect(request)
        name = request.path_params["target"]
        if name.startswith("models/"):
            name = name[len("models/") :]
        try:
            await self.state.auth.authenticate(cast("Scope", request.scope), dict(request.query_params))
            self.state.router.resolve(name)  # unknown: 404 in the caller's shape
        except GatewayError as err:
            return self._error(dialect, err)
        return JSONResponse(_listing(dialect).entry(name, int(self.state.started)))
