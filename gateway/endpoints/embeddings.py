"""Embeddings endpoints: OpenAI ``POST /v1/embeddings`` and Gemini ``:embedContent`` /
``:batchEmbedContents``. Each dialect's wire is its package's ``embeddings`` module; the pipeline
is gateway/relay/embeddings.py. Declared by the codecs' routes (``CallerRoute(kind="embed")``,
``ModelAction(kind="embed")``), so the app's route table gains them without naming them."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl

from gateway.asgi import Receive, Scope, Send, headers_dict
from gateway.dialects.base import RequestMeta
from gateway.dialects.gemini import embeddings as gemini
from gateway.dialects.openai_chat import embeddings as openai
from gateway.relay.embeddings import EmbedRelay

if TYPE_CHECKING:
    from gateway.relay.state import GatewayState


class EmbedEndpoint:
    """``POST /v1/embeddings`` (and ``/embeddings``): OpenAI's."""

    def __init__(self, state: GatewayState, dialect: str) -> None:
        self.relay = EmbedRelay(state)
        self.dialect = dialect

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        meta = RequestMeta(
            query=dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"))), headers=headers_dict(scope)
        )
        await self.relay.serve(self.dialect, scope, receive, send, meta, openai.parse_request, openai.encode_answer)


async def serve_gemini(
    state: GatewayState, action: str, scope: Scope, receive: Receive, send: Send, meta: RequestMeta
) -> None:
    """``{model}:embedContent`` / ``{model}:batchEmbedContents``, the model from the URL."""
    batch = action == "batchEmbedContents"
    model = meta.path_model or ""
    await EmbedRelay(state).serve(
        "gemini",
        scope,
        receive,
        send,
        meta,
        lambda obj: gemini.parse_request(obj, model, batch),
        partial(gemini.encode_answer, batch=batch),
    )
