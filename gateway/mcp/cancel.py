"""Cancellation of a running ``tools/call``, however the client says it, passed on to the server.

A stateless endpoint hears of a cancellation in one of two ways, and the SDK's server acts on
neither across requests:

* the handshake revisions send ``notifications/cancelled {requestId}`` as a *separate* POST: the
  call it names is found here by (the caller's key, the request id) among this replica's calls;
* a 2026-07-28 client just closes the request's stream: the ``http.disconnect`` of that POST is
  watched here (``Watch``), the SDK's transport reading a ``receive`` that only relays it.

Either way the call's ``CancelScope`` is cancelled, so the upstream call is cancelled and the SDK's
client tells the MCP server (its own ``notifications/cancelled``). Two clients of one key using
the same request id at the same moment on one replica are not told apart (there is no session to
tell them by); a cancellation from another replica does not reach this one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio

from gateway.asgi import Receive

CANCEL_KEY = "gateway.mcp.cancel"  # the request's Watch, on the ASGI scope


class Watch:
    """One POST's link to the call it carries: cancelled when its client goes away."""

    __slots__ = ("scope", "gone")

    def __init__(self) -> None:
        self.scope: anyio.CancelScope | None = None
        self.gone = False

    def cancel(self) -> None:
        self.gone = True
        if self.scope is not None:
            self.scope.cancel()


class InFlight:
    """This replica's running calls, by (key name, JSON-RPC request id)."""

    def __init__(self) -> None:
        self.calls: dict[tuple[str, Any], Watch] = {}

    @contextmanager
    def running(self, key: str, request_id: Any, watch: Watch | None) -> Iterator[anyio.CancelScope]:
        """The call's cancel scope while it runs (registered for ``notifications/cancelled``)."""
        watch = watch if watch is not None else Watch()
        with anyio.CancelScope() as scope:
            watch.scope = scope
            if watch.gone:
                scope.cancel()
            self.calls[(key, request_id)] = watch
            try:
                yield scope
            finally:
                if self.calls.get((key, request_id)) is watch:
                    del self.calls[(key, request_id)]

    def cancel(self, key: str, request_id: Any) -> bool:
        watch = self.calls.get((key, request_id))
        if watch is None:
            return False
        watch.cancel()
        return True


def watched(body: bytes, receive: Receive, watch: Watch) -> tuple[Receive, asyncio.Task[None]]:
    """A ``receive`` for the SDK that hands it ``body`` and then only the disconnect, and the task
    that reads the real ``receive`` for that disconnect (cancel it when the request is answered)."""
    gone = asyncio.Event()

    async def read() -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                gone.set()
                watch.cancel()
                return

    sent = False

    async def replayed() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    return replayed, asyncio.get_running_loop().create_task(read())
