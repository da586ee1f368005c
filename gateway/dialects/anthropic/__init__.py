"""The ``anthropic`` dialect: Anthropic Messages (``POST /v1/messages``).

Files: ``request_parse`` (caller JSON → ChatRequest), ``request_build`` (ChatRequest → upstream
call), ``stream_decode`` / ``stream_encode`` (SSE events ⇄ gateway events), ``whole`` (``message``
objects), ``stop_reasons``, ``usage`` (Anthropic's ``input_tokens`` excludes cache tokens; the
canonical ``input`` includes them), ``errors`` (``{"type":"error","error":{type,message}}``,
overloaded = HTTP 529).

Thinking signatures: an Anthropic caller gets a foreign signature packed as ``gw~<origin>~<raw>``
in the thinking block's ``signature`` (it sends the block back unchanged on the next turn; the
parser unpacks it); Anthropic's own signatures pass unchanged.
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

from . import bedrock, caller, errors, fields, ratelimit, request_build, request_parse, vertex, whole
from .fast_path import RULES as FAST_PATH
from .stream_decode import AnthropicStreamDecoder
from .stream_encode import AnthropicStreamEncoder


class AnthropicCodec:
    name = "anthropic"
    fast_path = FAST_PATH
    limits = fields.LIMITS  # what an upstream of this dialect cannot carry (gateway/dialects/carry.py)
    params = fields.PARAMS  # IR field -> this dialect's parameter, for refusals in a caller's terms
    hints = fields.HINTS  # sampling hints with no IR slot, reported when lost (carry.py)
    identity = Identity("anthropic", "chat", "anthropic")
    routes = caller.ROUTES

    def __init__(self) -> None:
        self.rate_limit_headers: RateLimitHeaders | None = ratelimit.headers
        self.models: ModelListing | None = caller.MODELS
        self.counting: TokenCounting | None = caller.COUNTING
        self.own_api: OwnAPI | None = OwnAPI(
            "anthropic", "https://api.anthropic.com", "ANTHROPIC_API_KEY", ("claude-*",)
        )
        self.stored: StoredObjects | None = None
        self.platforms: Mapping[str, OnPlatform] = {
            "bedrock": bedrock.ADAPTER,
            "vertex": vertex.ADAPTER,
        }  # cloud platforms that serve it

    def recognises(self, path: str, header_names: Collection[bytes], query_keys: Collection[str]) -> bool:
        return caller.recognises(path, header_names, query_keys)

    def auth_headers(self, key: str | None) -> dict[str, str]:
        """The provider's own API: ``x-api-key`` and the API version every request must name."""
        return {"anthropic-version": "2023-06-01", "x-api-key": key} if key else {"anthropic-version": "2023-06-01"}

    def parse_request(self, body: dict[str, Any], meta: RequestMeta) -> ChatRequest:
        return request_parse.parse_request(body, meta)

    def build_request(self, req: ChatRequest, upstream_model: str, options: BuildOptions) -> UpstreamCall:
        return request_build.build_request(req, upstream_model, options)

    def stream_decoder(self) -> AnthropicStreamDecoder:
        return AnthropicStreamDecoder()

    def decode_whole(self, body: dict[str, Any]) -> list[Event]:
        return whole.decode_whole(body)

    def decode_error(self, status: int, body: bytes) -> GatewayError:
        return errors.decode_error(status, body)

    def stream_encoder(self, ctx: EncodeContext) -> AnthropicStreamEncoder:
        return AnthropicStreamEncoder(ctx)

    def encode_whole(self, reply: Reply, ctx: EncodeContext) -> dict[str, Any]:
        return whole.encode_whole(reply, ctx)

    def render_error(self, err: GatewayError) -> tuple[int, dict[str, Any]]:
        return errors.render_error(err)


CODEC = AnthropicCodec()

__all__ = ["CODEC", "AnthropicCodec"]
