"""Token counting endpoints: Anthropic ``/v1/messages/count_tokens``, Gemini ``:countTokens`` and
OpenAI ``/v1/responses/input_tokens``.

The shapes are the codecs' (``Codec.counting``). Forwarded to the routed upstream when its
dialect's API counts (``TokenCounting.upstream_call``: Anthropic ``count_tokens``, Gemini
``countTokens``); otherwise answered with a documented estimate:
4 characters per token over every text in the request (system, messages, tool schemas), plus
a few tokens per message. Estimates are marked with the response header ``x-gateway-estimate: 1``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

import orjson

from gateway.asgi import (
    Receive,
    Scope,
    Send,
    headers_dict,
    parse_json_object,
    read_body,
    send_json,
)
from gateway.dialects.base import RequestMeta, TokenCounting
from gateway.dialects.registry import codec_for
from gateway.errors import GatewayError
from gateway.http import client as http_client
from gateway.ir import ChatRequest
from gateway.token_estimate import estimate_tokens

if TYPE_CHECKING:
    from gateway.relay.state import GatewayState


async def _upstream_count(state: GatewayState, req: ChatRequest) -> int | None:
    """Ask the routed upstream to count, where its dialect can; ``None`` means: estimate."""
    target = state.router.resolve(req.model).targets[0]
    provider = state.providers[target.provider]
    counting = codec_for(provider.dialect).counting
    if counting is None or not counting.counts_upstream or provider.pool is None:
        return None
    from gateway.dialects.base import BuildOptions

    built = codec_for(provider.dialect).build_request(
        req, target.upstream_model, BuildOptions(default_max_tokens=provider.settings.default_max_tokens)
    )
    call = counting.upstream_call(built, target.upstream_model)
    if call is not None:
        call = provider.platform.count_call(call, target.upstream_model, provider.settings)  # Vertex: its own routes
    if call is None:
        return None
    try:
        response = await provider.send(call)
    except http_client.HTTPError:
        return None
    try:
        data = await response.aread()
    finally:
        await provider.close_response(response)
    if response.status_code >= 400:
        return None
    try:
        parsed: Any = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    value = parsed.get("input_tokens", parsed.get("totalTokens")) if isinstance(parsed, dict) else None
    return value if isinstance(value, int) else None


def _counting(dialect: str) -> TokenCounting:
    counting = codec_for(dialect).counting
    assert counting is not None, f"{dialect} has no counting endpoint"  # routes are declared by such codecs only
    return counting


async def _count(
    state: GatewayState, dialect: str, scope: Scope, receive: Receive, meta: RequestMeta
) -> tuple[int, bool]:
    spec = await state.auth.authenticate(scope, meta.query)
    body = parse_json_object(
        scope,
        await read_body(scope, receive, state.settings.server.max_body_bytes),
        state.settings.server.max_json_depth,
    )
    body = _counting(dialect).caller_body(body)
    req = codec_for(dialect).parse_request(body, meta)
    req.dialect = dialect
    if spec is not None and not spec.allows(req.model):
        raise GatewayError("permission", f"key {spec.name!r} may not call model {req.model!r}", 403, param="model")
    if req.previous_id and state.stateful is not None:  # count the stored history too
        await state.stateful.prepare(req, dialect, spec)  # only the caller key's own turns
    counted = await _upstream_count(state, req)
    return (counted, False) if counted is not None else (estimate_tokens(req), True)


async def serve_count(
    state: GatewayState, dialect: str, scope: Scope, receive: Receive, send: Send, meta: RequestMeta
) -> None:
    """Count a request body of ``dialect`` and answer in its shape (errors too)."""
    try:
        tokens, estimated = await _count(state, dialect, scope, receive, meta)
    except GatewayError as err:
        status, body = codec_for(dialect).render_error(err)
        await send_json(send, status, body)
        return
    await send_json(
        send, 200, _counting(dialect).answer(tokens), [(b"x-gateway-estimate", b"1")] if estimated else None
    )


class CountEndpoint:
    """``POST /v1/messages/count_tokens`` (anthropic) and ``/v1/responses/input_tokens`` (openai-responses);
    Gemini's ``:countTokens`` comes through ``GeminiEndpoint`` with the model from the URL."""

    def __init__(self, state: GatewayState, dialect: str) -> None:
        self.state = state
        self.dialect = dialect

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        meta = RequestMeta(query=dict(parse_qsl(scope.get("query_string", b"").decode())), headers=headers_dict(scope))
        await serve_count(self.state, self.dialect, scope, receive, send, meta)
