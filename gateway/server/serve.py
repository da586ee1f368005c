"""Running under uvicorn: the app factory workers import, and a server that shuts down gracefully.

On SIGTERM uvicorn stops accepting and waits for open connections. ``GracefulServer`` adds what a
streaming gateway needs on top: in-flight streams get ``shutdown_grace_seconds`` to finish, then each
is ended with an error frame in its caller's dialect rather than cut mid-answer.
"""

from __future__ import annotations

import asyncio
import socket

import uvicorn
from starlette.applications import Starlette

from gateway.server.app import create_app, end_live_streams
from gateway.server.gc_policy import tune_gc
from gateway.settings import load_settings


def app_from_env() -> Starlette:
    """Build the app from ``$GATEWAY_CONFIG`` / the default search (used by each worker)."""
    return create_app(load_settings())


class GracefulServer(uvicorn.Server):
    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        tune_gc()  # the app has started: freeze what it built (gateway/server/gc_policy.py)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        app = self.config.loaded_app
        state = None
        while app is not None and state is None:
            state = getattr(getattr(app, "state", None), "gateway", None)
            app = getattr(app, "app", None)
        ender = None
        if state is not None:
            grace = max(0.0, state.settings.server.shutdown_grace_seconds - 0.5)
            ender = asyncio.ensure_future(end_live_streams(state, grace))
        try:
            await super().shutdown(sockets)
        finally:
            if ender is not None:
                ender.cancel()
