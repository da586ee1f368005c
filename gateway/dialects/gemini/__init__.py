"""The ``gemini`` dialect: Gemini API ``generateContent`` / ``streamGenerateContent`` (``?alt=sse``,
or without it the REST default, a streamed JSON array: json_array.py).

Where each mapping lives: request_parse.py (caller JSON → IR), request_build.py (IR → upstream
call), schema.py (JSON Schema → Gemini's OpenAPI subset), stream_decode.py / stream_encode.py,
whole.py, usage.py, stop_reasons.py, errors.py.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from gateway.dialects.base import (
    BuildOptions,
    EncodeContext,
    Identity,
    ModelListing,
    OnPlatform,
    OwnAPI,
    RateLimitHeaders,
    RequestMeta,
    StoredObjects,
    TokenCounting,
    UpstreamCall,
)
from gateway.errors import GatewayError
from gateway.events import Event
from gateway.ir import ChatRequest
from gateway.reply import Reply

from . import caller, errors, fields, request_build, request_parse, vertex, whole
from .fast_path import RULES as FAST_PATH
from .json_array import JsonArrayStreamEncoder
from .schema import convert_for_gemini
from .stream_decode import GeminiStreamDecoder
from .stream_encode import GeminiStreamEncoder


class GeminiCodec:
    name = "gemini"
    fast_path = FAST_PATH
    limits = fields.LIMITS  # what an upstream of this dialect cannot carry (gateway/dialects/carry.py)
    params = fields.PARAMS  # IR field -> this dialect's parameter, for refusals in a caller's terms
    hints = fields.HINTS  # sampling hints with no IR slot, reported when lost (carry.py)
    identity = Identity("gcp.gemini", "generate_content", "google")
    routes = caller.ROUTES

    def __init__(self) -> None:
        self.rate_limit_headers: RateLimitHeaders | None = None
        self.models: ModelListing | None = caller.MODELS
        self.counting: TokenCounting | None = caller.COUNTING
        self.own_api: OwnAPI | None = OwnAPI(
            "gemini", "https://generativelanguage.googleapis.com", "GEMINI_API_KEY", ("gemini-*",)
        )
        self.stored: StoredObjects | None = None
        self.platforms: Mapping[str, OnPlatform] = {"vertex": vertex.ADAPTER}  # cloud platforms that serve it

    def recognises(self, path: str, header_names: Collection[bytes], query_keys: Collection[str]) -> bool:
        return caller.recognises(path, header_names, query_keys)

    def auth_headers(self, key: str | None) -> dict[str, str]:
        """The Gemini API: its key in ``x-goog-api-key`` (never in the URL, where logs keep it)."""
        return {"x-goog-api-key": key} if key else {}

    def parse_request(self, body: dict[str, Any], meta: RequestMeta) -> ChatRequest:
        return request_parse.parse_request(body, meta)

    def build_request(self, req: ChatRequest, upstream_model: str, options: BuildOptions) -> UpstreamCall:
        return request_build.build_request(req, upstream_model, options)

    def stream_decoder(self) -> GeminiStreamDecoder:
        return GeminiStreamDecoder()

    def decode_whole(self, body: dict[str, Any]) -> list[Event]:
        return whole.decode_whole(body)

    def decode_error(self, status: int, body: bytes) -> GatewayError:
        return errors.decode_error(status, body)

    def stream_encoder(self, ctx: EncodeContext) -> GeminiStreamEncoder | JsonArrayStreamEncoder:
        if ctx.request.stream_framing == "json-array":
            return JsonArrayStreamEncoder(GeminiStreamEncoder(ctx))
        return GeminiStreamEncoder(ctx)

    def encode_whole(self, reply: Reply, ctx: EncodeContext) -> dict[str, Any]:
        return whole.encode_whole(reply, ctx)

    def render_error(self, err: GatewayError) -> tuple[int, dict[str, Any]]:
        return errors.render_error(err)


CODEC = GeminiCodec()

__all__ = ["CODEC", "GeminiCodec", "convert_for_gemini"]
