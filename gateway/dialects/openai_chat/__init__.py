"""The ``openai-chat`` dialect: OpenAI Chat Completions (``POST /v1/chat/completions``).

Files: ``request_parse`` (caller JSON → ChatRequest), ``request_build`` (ChatRequest → upstream
call), ``stream_decode`` / ``stream_encode`` (chunks ⇄ events), ``whole`` (``chat.completion``
objects), ``stop_reasons``, ``usage``, ``errors``.

Thinking for Chat callers
-------------------------
Chat has no reasoning field in the official API; the gateway follows the convention of
OpenAI-compatible servers (DeepSeek, vLLM): thinking text is sent as ``delta.reasoning_content``
(``message.reasoning_content`` when whole) and read back from ``reasoning_content`` (or
``reasoning``) in upstream deltas and in assistant messages of requests.

Chat has no signature field either. Thinking signatures (e.g. a Gemini ``thoughtSignature``,
needed on the next turn for function calling) therefore ride on tool call ids: the encoder packs a
signature with ``signatures.for_caller("openai-chat", upstream_dialect, sig)`` (``gw~<origin>~<raw>``)
and appends it to the id of the NEXT tool call it emits::

    "id": "call_abc~gw~gemini~CiQB0e2K..."

The caller's SDK stores that id opaquely and sends it back in ``assistant.tool_calls[].id`` and in
``tool.tool_call_id``. The parser splits any id containing ``~gw~`` at the first ``~gw~``: the part
before is the real id; ``signatures.unpack`` of the rest gives a ``ThinkingPart(signature=raw,
origin=origin)`` inserted right before that ``ToolCallPart``. (An Anthropic signature signs the
thinking text itself, so when the message also carries ``reasoning_content`` it is put on that
leading thinking part instead.) When several thinking blocks precede a tool call, the latest
block's signature is the one carried. A signature with no tool call after it
(a text-only answer) is not transported; providers do not need it back in that case.
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

from . import azure, caller, errors, fields, ratelimit, request_build, request_parse, whole
from .fast_path import RULES as FAST_PATH
from .stream_decode import ChatStreamDecoder
from .stream_encode import ChatStreamEncoder


class OpenAIChatCodec:
    name = "openai-chat"
    fast_path = FAST_PATH
    limits = fields.LIMITS  # what an upstream of this dialect cannot carry (gateway/dialects/carry.py)
    params = fields.PARAMS  # IR field -> this dialect's parameter, for refusals in a caller's terms
    hints = fields.HINTS  # sampling hints with no IR slot, reported when lost (carry.py)
    identity = Identity("openai", "chat", "openai")
    routes = caller.ROUTES

    def __init__(self) -> None:
        self.rate_limit_headers: RateLimitHeaders | None = ratelimit.headers
        self.models: ModelListing | None = caller.MODELS
        self.counting: TokenCounting | None = None
        self.own_api: OwnAPI | None = OwnAPI(
            "openai", "https://api.openai.com/v1", "OPENAI_API_KEY", ("gpt-*", "o1*", "o3*", "o4*")
        )
        self.stored: StoredObjects | None = None
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

    def stream_decoder(self) -> ChatStreamDecoder:
        return ChatStreamDecoder()

    def decode_whole(self, body: dict[str, Any]) -> list[Event]:
        return whole.decode_whole(body)

    def decode_error(self, status: int, body: bytes) -> GatewayError:
        return errors.decode_error(status, body)

    def stream_encoder(self, ctx: EncodeContext) -> ChatStreamEncoder:
        return ChatStreamEncoder(ctx)

    def encode_whole(self, reply: Reply, ctx: EncodeContext) -> dict[str, Any]:
        return whole.encode_whole(reply, ctx)

    def render_error(self, err: GatewayError) -> tuple[int, dict[str, Any]]:
        return errors.render_error(err)


CODEC = OpenAIChatCodec()

__all__ = ["CODEC", "OpenAIChatCodec"]
