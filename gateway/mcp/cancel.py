"""Cancellation of a running ``tools/call``, however the client says it and whichever replica hears it.

A stateless endpoint hears of a cancellation in one of two ways, and the SDK's server acts on
neither across requests:

* the handshake revisions send ``notifications/cancelled {requestId}`` as a *separate* POST: the
  call it names is found by (the caller's key, the request id) among this replica's calls; when
  it is not running here the notification may have reached another replica than the call (a load
  balancer sends each POST where it likes), so a short-lived *cancel marker* is written to the
  ``[store]`` (``MARKER_KIND``), which a running call polls every ``POLL_SECONDS`` — the way a
  stored stream hears of a cancel from any replica through its heartbeat (relay/stateful.py);
* a 2026-07-28 client just closes the request's stream: the ``http.disconnect`` of that POST is
  watched here (``Watch``), the SDK's transport reading a ``receive`` that only relays it.

Either way the call's ``CancelScope`` is cancelled, so the upstream call is cancelled and the SDK's
client tells the MCP server (its own ``notifications/cancelled``). Clients number their requests
from 0 in every session, so a marker counts only for a call that started before it was written
(less ``CLOCK_SKEW_SECONDS`` between replicas' clocks): a marker left by a cancel that came after
its call ended never stops a later call of the same key and id. Two clients of one key using the
same request id at the same moment are not told apart (there is no session to tell them by).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import orjson

from gateway.asgi import Receive

log = logging.getLogger("gateway.mcp")

CANCEL_KEY = "gateway.mcp.cancel"  # the request's Watch, on the ASGI scope
MARKER_KIND = "mcp-cancel"  # the store's object kind of a cancel marker
POLL_SECONDS = 0.25  # how often a running call looks for a marker (the first look after this long)
CLOCK_SKEW_SECONDS = 0.5  # a marker written up to this long before the call started still counts


class Watch:
    """One POST's (or one batch element's) link to the call it carries: cancelled when its client
    goes away or cancels it; cancelling a batch's watch cancels each element's."""

    __slots__ = ("scope", "gone", "event", "children")

    def __init__(self) -> None:
        self.scope: anyio.CancelScope | None = None
        self.gone = False
        self.event = asyncio.Event()
        self.children: list[Watch] = []

    def cancel(self) -> None:
        """The call is cancelled (``notifications/cancelled``): its scope ends."""
        self.gone = True
        if self.scope is not None:
            self.scope.cancel()
        for child in self.children:
            child.cancel()

    def hang_up(self) -> None:
        """The client went away: the call is cancelled and the SDK's transport hears the disconnect."""
        self.event.set()
        self.cancel()
        for child in self.children:
            child.hang_up()

    def child(self) -> Watch:
        """A batch element's watch, hung up with the batch's POST."""
        watch = Watch()
        self.children.append(watch)
        if self.event.is_set():
            watch.hang_up()
        return watch


def marker_id(key: str, request_id: Any) -> str:
    return f"{key}:{orjson.dumps(request_id).decode()}"


class InFlight:
    """This replica's running calls, by (key name, JSON-RPC request id), and the markers of the
    calls running elsewhere."""

    def __init__(self) -> None:
        self.calls: dict[tuple[str, Any], Watch] = {}
        self.store: Any = None  # the [store], once open: the markers other replicas read

    @contextlib.asynccontextmanager
    async def running(self, key: str, request_id: Any, watch: Watch | None) -> AsyncIterator[anyio.CancelScope]:
        """The call's cancel scope while it runs (registered for ``notifications/cancelled`` here
        and, through the store's markers, on any replica)."""
        watch = watch if watch is not None else Watch()
        started = time.time()
        poller = None
        if self.store is not None:
            poller = asyncio.get_running_loop().create_task(self._poll(self.store, key, request_id, started, watch))
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
                if poller is not None:
                    poller.cancel()

    async def cancel(self, key: str, request_id: Any) -> bool:
        """Cancel the call here, or leave the marker for the replica running it; True if it ran here."""
        watch = self.calls.get((key, request_id))
        if watch is not None:
            watch.cancel()
            return True
        if self.store is not None:
            try:
                await self.store.put(MARKER_KIND, marker_id(key, request_id), {"at": time.time()})
            except Exception as exc:  # the store is down: the cancel cannot reach another replica
                log.warning("MCP cancel marker not written (%s)", type(exc).__name__)
        return False

    @staticmethod
    async def _poll(store: Any, key: str, request_id: Any, started: float, watch: Watch) -> None:
        name = marker_id(key, request_id)
        while True:
            await asyncio.sleep(POLL_SECONDS)
            try:
                marker = await store.get(MARKER_KIND, name)
            except Exception:
                continue  # the store is down a moment: the next look may work
            if marker is not None and float(marker.get("at", 0.0)) >= started - CLOCK_SKEW_SECONDS:
                with contextlib.suppress(Exception):
                    await store.delete(MARKER_KIND, name)
                watch.cancel()
                return


def replayed(body: bytes, watch: Watch) -> Receive:
    """A ``receive`` for the SDK that hands it ``body``, then the disconnect once ``watch`` is gone."""
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await watch.event.wait()
        return {"type": "http.disconnect"}

    return receive


def watch_disconnect(receive: Receive, watch: Watch) -> asyncio.Task[None]:
    """The task that reads the real ``receive`` for the client's disconnect and then hangs ``watch``
    up (cancel it when the request is answered)."""

    async def read() -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                watch.hang_up()
                return

    return asyncio.get_running_loop().create_task(read())
