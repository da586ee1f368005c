"""The Gemini Interactions dialect (``POST /v1beta/interactions``), stateless codec.

The wire format is the May-2026 steps schema (``/work/shared/INTERACTIONS.md``). This package only
translates; storing interactions, detached generation, ``GET`` / resume / cancel are built on top
of it: the stream encoder takes the interaction id and a first event counter, and every event it
writes carries ``event_id`` = ``event_id_for(n)`` (``parse_event_id`` reads ``n`` back).
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
    StreamDecoder,
    TokenCounting,
    UpstreamCall,
)
from gateway.errors import GatewayError
from gateway.events import Event
from gateway.ir import ChatRequest
from gateway.reply import Reply

from . import caller, errors, fields, request_build, request_parse, vertex, whole
from .fast_path import RULES as FAST_PATH
from .stored import STORED
from .stream_decode import InteractionsStreamDecoder
from .stream_encode import DONE_FRAME, InteractionsStreamEncoder, event_id_for, parse_event_id

DIALECT = "gemini-interactions"

__all__ = [
    "CODEC",
    "DONE_FRAME",
    "InteractionsCodec",
    "InteractionsStreamDecoder",
    "InteractionsStreamEncoder",
    "event_id_for",
    "parse_event_id",
]


class InteractionsCodec:
    name = DIALECT
    fast_path = FAST_PATH
    limits = fields.LIMITS  # what an upstream of this dialect cannot carry (gateway/dialects/carry.py)
    params = fields.PARAMS  # IR field -> this dialect's parameter, for refusals in a caller's terms
    hints = fields.HINTS  # sampling hints with no IR slot, reported when lost (carry.py)
    identity = Identity("gcp.gemini", "chat", "google")
    routes = caller.ROUTES

    def __init__(self) -> None:
        self.rate_limit_headers: RateLimitHeaders | None = None
        self.models: ModelListing | None = None
        self.counting: TokenCounting | None = None
        self.own_api: OwnAPI | None = None
        self.stored: StoredObjects | None = STORED
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

    def resume_call(self, decoder: StreamDecoder) -> UpstreamCall | None:
        """How to pick a dropped upstream stream up where it stopped (``Resumable``): ``GET`` the
        interaction with ``last_event_id`` instead of a second ``POST`` (which would be a second,
        billed generation). ``None`` when there is nothing to resume (no id seen yet)."""
        if (
            not isinstance(decoder, InteractionsStreamDecoder)
            or decoder.interaction_id is None
            or decoder.last_event_id is None
        ):
            return None
        params = {"stream": "true", "last_event_id": decoder.last_event_id}
        return UpstreamCall(path=f"/v1beta/interactions/{decoder.interaction_id}", body={}, params=params, method="GET")

    def stream_ended(self, decoder: StreamDecoder) -> bool:
        """Whether the stream already ended in the dialect's own terms (``Resumable``)."""
        return isinstance(decoder, InteractionsStreamDecoder) and decoder._finished

    def stream_decoder(self) -> InteractionsStreamDecoder:
        return InteractionsStreamDecoder()

    def decode_whole(self, body: dict[str, Any]) -> list[Event]:
        return whole.decode_whole(body)

    def decode_error(self, status: int, body: bytes) -> GatewayError:
        return errors.decode_error(status, body)

    def stream_encoder(
        self, ctx: EncodeContext, interaction_id: str | None = None, start: int = 0
    ) -> InteractionsStreamEncoder:
        return InteractionsStreamEncoder(ctx, interaction_id, start)

    def encode_whole(self, reply: Reply, ctx: EncodeContext, interaction_id: str | None = None) -> dict[str, Any]:
        return whole.encode_whole(reply, ctx, interaction_id)

    def render_error(self, err: GatewayError) -> tuple[int, dict[str, Any]]:
        return errors.render_error(err)


CODEC = InteractionsCodec()
