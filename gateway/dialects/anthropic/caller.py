"""What the gateway serves to Anthropic callers besides the model call: the model list
(``GET /v1/models``) and token counting (``POST /v1/messages/count_tokens``), in Anthropic's shapes."""

from __future__ import annotations

from typing import Any

from gateway.dialects.base import CallerRoute, UpstreamCall

ROUTES = (
    CallerRoute("/v1/messages"),
    CallerRoute("/v1/messages/count_tokens", "count"),
)


def recognises(path: str, header_names: Any, query_keys: Any) -> bool:
    """Every Anthropic SDK sends ``anthropic-version``; the Messages paths are its own."""
    return b"anthropic-version" in header_names or path.startswith("/v1/messages")


class Models:
    def entry(self, name: str, created: int) -> dict[str, Any]:
        return {"type": "model", "id": name, "display_name": name, "created_at": "2025-01-01T00:00:00Z"}

    def listing(self, names: list[str], created: int) -> dict[str, Any]:
        return {
            "data": [self.entry(n, created) for n in names],
            "has_more": False,
            "first_id": names[0] if names else None,
            "last_id": names[-1] if names else None,
        }


# what a Messages body has that count_tokens refuses
_NOT_COUNTED = ("max_tokens", "stream", "temperature", "top_p", "top_k", "stop_sequences", "metadata")


class Counting:
    counts_upstream = True

    def caller_body(self, body: dict[str, Any]) -> dict[str, Any]:
        body.setdefault("max_tokens", 1)  # count_tokens has no max_tokens; the Messages parser needs one
        return body

    def answer(self, tokens: int) -> dict[str, Any]:
        return {"input_tokens": tokens}

    def upstream_call(self, call: UpstreamCall, upstream_model: str) -> UpstreamCall | None:
        call.path = "/v1/messages/count_tokens"
        call.body = {k: v for k, v in call.body.items() if k not in _NOT_COUNTED}
        return call


MODELS = Models()
COUNTING = Counting()
