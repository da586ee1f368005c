"""The ``bedrock-converse`` dialect: Amazon Bedrock's Converse API, as an upstream only.

Converse is Bedrock's one request shape for every model it hosts (Llama, Mistral, Nova, DeepSeek,
Qwen, gpt-oss, Claude …): ``POST /model/{modelId}/converse-stream`` answered with an AWS
eventstream of ``messageStart`` / ``contentBlock*`` / ``messageStop`` / ``metadata`` events, or
``/converse`` answered with one JSON reply. No caller speaks it (``routes = ()``: no caller
endpoint), so the codec builds requests and decodes replies and errors, and refuses the caller-side
operations (``parse_request``, ``stream_encoder``, ``encode_whole``).

Files: ``request_build`` (ChatRequest → call; ``content`` folds the messages, ``models`` tells
the model families apart for ``additionalModelRequestFields``), ``stream_decode`` (frames from
the platform's eventstream framer → events), ``whole``, ``errors``, ``usage`` (``inputTokens``
leaves the cache tokens out), ``stop_reasons``, ``fields`` (what Converse cannot carry),
``fast_path``. Host, SigV4 and the eventstream binary framing belong to gateway/platforms/.

Reasoning signatures made here have the origin ``bedrock-converse`` and are sent back only to a
provider of this dialect.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, NoReturn

from gateway.dialects.base import (
    BuildOptions,
    CallerRoute,
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

from . import bedrock, errors, fields, request_build, whole
from .fast_path import RULES as FAST_PATH
from .stream_decode import ConverseStreamDecoder

NAME = "bedrock-converse"


def _upstream_only(what: str) -> NoReturn:
    raise NotImplementedError(f"{NAME} is an upstream dialect only: no caller speaks it ({what})")


class ConverseCodec:
    name = NAME
    fast_path = FAST_PATH
    limits = fields.LIMITS  # what an upstream of this dialect cannot carry (gateway/dialects/carry.py)
    params = fields.PARAMS  # empty: no caller writes Converse parameters
    hints = fields.HINTS  # sampling hints with no IR slot, reported when lost (carry.py)
    identity = Identity("aws.bedrock", "chat", "aws")
    routes: tuple[CallerRoute, ...] = ()  # upstream only

    def __init__(self) -> None:
        self.rate_limit_headers: RateLimitHeaders | None = None
        self.models: ModelListing | None = None
        self.counting: TokenCounting | None = None
        self.own_api: OwnAPI | None = None  # reached through the bedrock platform (gateway/platforms/)
        self.stored: StoredObjects | None = None
        self.platforms: Mapping[str, OnPlatform] = {"bedrock": bedrock.ADAPTER}  # cloud platforms that serve it

    def recognises(self, path: str, header_names: Collection[bytes], query_keys: Collection[str]) -> bool:
        return False  # no caller speaks it

    def auth_headers(self, key: str | None) -> dict[str, str]:
        """A Bedrock API key is a bearer token; without one, the bedrock platform signs each request
        with SigV4 (gateway/platforms/), which replaces these headers."""
        return {"authorization": f"Bearer {key}"} if key else {}

    def parse_request(self, body: dict[str, Any], meta: RequestMeta) -> ChatRequest:
        _upstream_only("parse_request")

    def build_request(self, req: ChatRequest, upstream_model: str, options: BuildOptions) -> UpstreamCall:
        return request_build.build_request(req, upstream_model, options)

    def stream_decoder(self) -> ConverseStreamDecoder:
        return ConverseStreamDecoder()

    def decode_whole(self, body: dict[str, Any]) -> list[Event]:
        return whole.decode_whole(body)

    def decode_error(self, status: int, body: bytes) -> GatewayError:
        return errors.decode_error(status, body)

    def stream_encoder(self, ctx: EncodeContext) -> NoReturn:
        _upstream_only("stream_encoder")

    def encode_whole(self, reply: Reply, ctx: EncodeContext) -> dict[str, Any]:
        _upstream_only("encode_whole")

    def render_error(self, err: GatewayError) -> tuple[int, dict[str, Any]]:
        return errors.render_error(err)


CODEC = ConverseCodec()

__all__ = ["CODEC", "ConverseCodec"]
