"""The paths the gateway serves to OpenAI Responses callers, and token counting
(``POST /v1/responses/input_tokens``, always an estimate: no upstream dialect is asked)."""

from __future__ import annotations

from typing import Any

from gateway.dialects.base import CallerRoute, UpstreamCall

ROUTES = (
    CallerRoute("/v1/responses"),
    CallerRoute("/responses"),
    CallerRoute("/v1/responses/input_tokens", "count"),  # before /v1/responses/{id}
    CallerRoute("/v1/responses/{id}", "stored", ("GET", "DELETE")),
    CallerRoute("/v1/responses/{id}/{action}", "stored", ("POST", "GET")),
)


def recognises(path: str, header_names: Any, query_keys: Any) -> bool:
    return path.startswith(("/v1/responses", "/responses"))


class Counting:
    counts_upstream = False

    def caller_body(self, body: dict[str, Any]) -> dict[str, Any]:
        return body

    def answer(self, tokens: int) -> dict[str, Any]:
        return {"object": "response.input_tokens", "input_tokens": tokens}

    def upstream_call(self, call: UpstreamCall, upstream_model: str) -> UpstreamCall | None:
        return None  # the gateway estimates


COUNTING = Counting()
