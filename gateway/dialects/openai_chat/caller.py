"""What the gateway serves to OpenAI Chat callers besides the model call: the model list
(``GET /v1/models``, ``/models``) in OpenAI's shape. Chat is the fallback caller: a request no
other dialect recognises is answered as OpenAI (registry order puts Chat last)."""

from __future__ import annotations

from typing import Any

from gateway.dialects.base import CallerRoute

ROUTES = (
    CallerRoute("/v1/chat/completions"),
    CallerRoute("/chat/completions"),
    CallerRoute("/v1/embeddings", "embed"),  # the wire: embeddings.py
    CallerRoute("/embeddings", "embed"),
)


def recognises(path: str, header_names: Any, query_keys: Any) -> bool:
    return True  # anything else: OpenAI's SDK and the many that copy it


class Models:
    def entry(self, name: str, created: int) -> dict[str, Any]:
        return {"id": name, "object": "model", "created": created, "owned_by": "gateway"}

    def listing(self, names: list[str], created: int) -> dict[str, Any]:
        return {"object": "list", "data": [self.entry(n, created) for n in names]}


MODELS = Models()
