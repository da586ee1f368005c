"""The OpenAI Responses dialect (``POST /v1/responses``).

Stateless: ``previous_response_id``, ``conversation`` and ``background`` need a response store and
are refused with a 400; reasoning round-trips through ``encrypted_content`` instead.
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
from gateway.dialects.openai_chat import ratelimit as openai_ratelimit
from gateway.errors import GatewayError
from gateway.events import Event
from gateway.ir import ChatRequest
from gateway.reply import Reply

from . import azure, caller, errors, fields, request_build, request_parse, whole
from .fast_path import RULES as FAST_PATH
from .stored import STORED
from .stream_decode import ResponsesStreamDecoder
from .stream_encode import ResponsesStreamEncoder

DIALECT = "openai-responses"


class ResponsesCodec:
    name = DIALECT
    fast_path = FAST_PATH
    limits = fields.LIMITS  # what an upstream of this dialect cannot carry (gateway/dialects/carry.py)
    params = fields.PARAMS  # IR field -> this dialect's parameter, for refusals in a caller's terms
    hints = fields.HINTS  # sampling hints with no IR slot, reported when lost (carry.py)
    identity = Identity("openai", "chat", "openai")
    routes = caller.ROUTES

    def __init__(self) -> None:
        self.rate_limit_headers: RateLimitHeaders | None = openai_ratelimit.headers
        self.models: ModelListing | None = None
        self.counting: TokenCounting | None = caller.COUNTING
        self.own_api: OwnAPI | None = None
        self.stored: StoredObjects | None = STORED
        self.platforms: Mapping[str, OnPlatform] = {"azure": azure.ADAPTER}  # cloud platforms that serve it

    def recognises(self, path: str, header_names: Collection[bytes], query_keys: Collection[str]) -> bool:
        return caller.recognises(path, header_names, query_keys)

    def auth_headers(self, key: str | None) -> dict[str, str]:
        """The provider's own API: a bearer token."""
        return {"authorization": f"Bearer {key}"} if key else {}

    def parse_request(self, body: dict[str, Any], meta: RequestMeta) -> ChatRequest:
        return request_parse.parse_request(body, meta)

    def build_request(self, req: ChatRequest, upstream_model: str, options: BuildOptions) -> UpstreamCall:
        return request_build.build_request(req, upstream_model, options)

    def stream_decoder(self) -> ResponsesStreamDecoder:
        return ResponsesStreamDecoder()

    def decode_whole(self, body: dict[str, Any]) -> list[Event]:
        return whole.decode_whole(body)

    def decode_error(self, status: int, body: bytes) -> GatewayError:
        return errors.decode_error(status, body)

    def stream_encoder(self, ctx: EncodeContext) -> ResponsesStreamEncoder:
        return ResponsesStreamEncoder(ctx)

    def encode_whole(self, reply: Reply, ctx: EncodeContext) -> dict[str, Any]:
        return whole.encode_whole(reply, ctx)

    def render_error(self, err: GatewayError) -> tuple[int, dict[str, Any]]:
        return errors.render_error(err)


CODEC = ResponsesCodec()
