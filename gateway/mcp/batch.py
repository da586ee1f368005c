"""JSON-RPC batches, served for the one revision that has them (2025-03-26).

2025-03-26 says a server MUST accept a batch (a JSON array of requests and/or notifications, or
of responses) in one ``POST``; 2025-06-18 removed batches and the later revisions have none. The
SDK's transport reads one message per ``POST``, so a batch is split here: each element goes
through the gateway's single-message path (key checks, limits, the access-log line of a
``tools/call`` — exactly as when sent alone) as a JSON-only request, the elements concurrently
(JSON-RPC lets a server answer a batch's calls in any order), and the answers are gathered into
one array; a notification or response gets no answer, and a batch of only those is ``202``.

Which revision a batch is for: the ``MCP-Protocol-Version`` header (which 2025-06-18 introduced;
a request without it is assumed 2025-03-26, as that revision's transport rules say), and an
``initialize`` inside the batch asks for its own revision. Any other revision: the whole batch is
refused with -32600 (Invalid Request), nothing of it run.
"""

from __future__ import annotations

from typing import Any

BATCH_REVISION = "2025-03-26"
MAX_BATCH_ELEMENTS = 100  # one batch's elements (each one a call); more is refused whole


def batch_refusal(elements: list[Any], header_version: str | None) -> str | None:
    """Why this batch is not served (the -32600 message), or None to serve it."""
    if not elements:
        return "Invalid Request: an empty batch"
    if len(elements) > MAX_BATCH_ELEMENTS:
        return f"Invalid Request: a batch of more than {MAX_BATCH_ELEMENTS} messages"
    version = header_version or BATCH_REVISION
    for element in elements:
        if isinstance(element, dict) and element.get("method") == "initialize":
            params = element.get("params")
            asked = params.get("protocolVersion") if isinstance(params, dict) else None
            version = asked if isinstance(asked, str) else version
    if version != BATCH_REVISION:
        return (
            f"Invalid Request: JSON-RPC batches exist only in MCP revision {BATCH_REVISION}; "
            f"revision {version} has none: send one message per request"
        )
    return None


def element_scope(scope: dict[str, Any]) -> dict[str, Any]:
    """The scope one element is served with: the batch's, asking for a JSON answer (the answers are
    gathered into one array), without the batch's ``content-length``."""
    headers = [(k, v) for k, v in scope.get("headers", []) if k not in (b"accept", b"content-length")]
    return {**scope, "headers": [*headers, (b"accept", b"application/json")]}


class Captured:
    """An ASGI ``send`` that keeps one element's answer: its status and body."""

    __slots__ = ("status", "chunks")

    def __init__(self) -> None:
        self.status = 0
        self.chunks: list[bytes] = []

    async def __call__(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
        elif message["type"] == "http.response.body":
            self.chunks.append(message.get("body", b""))

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)
