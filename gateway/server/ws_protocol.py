"""The gateway's WebSocket server protocol: uvicorn's websockets (sans-I/O) protocol with the
gateway's ``[websocket]`` bounds and a shutdown that lets the running turn finish.

uvicorn hands an ``Upgrade: websocket`` request from the HTTP protocol (``GatewayHttpProtocol``) to
this class. What it changes:

* the largest client message (``max_message_bytes``: larger is a 1009 close), the keepalive pings
  (``ping_interval``, ``ping_timeout``) from ``[websocket]``, not uvicorn's command-line defaults;
  permessage-deflate is negotiated when the client offers it (Codex does), at zlib level 1;
* on server shutdown uvicorn closes every socket at once (1012). Here an accepted socket is told
  instead (``websocket.SHUTDOWN`` in its receive queue): it takes no new turn, lets the running one
  finish — the gateway's shutdown grace ends it in the caller's terms if it must — and closes with
  a close frame (1001). uvicorn waits for the connection to close within its graceful timeout.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any, cast

from uvicorn.config import Config
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from uvicorn.server import ServerState
from websockets.extensions.permessage_deflate import ServerPerMessageDeflateFactory

from gateway.server.loaded_app import app_settings
from gateway.settings import WebSocketSettings

SHUTDOWN = "gateway.websocket.shutdown"  # (the same name as gateway.server.websocket.SHUTDOWN)

_SETTINGS: weakref.WeakKeyDictionary[Config, WebSocketSettings] = weakref.WeakKeyDictionary()


def settings_of(config: Config) -> WebSocketSettings:
    """The ``[websocket]`` settings of the gateway app this config serves (defaults for another app)."""
    cached = _SETTINGS.get(config)
    if cached is not None:
        return cached
    app = app_settings(config)
    settings = app.websocket if app is not None else WebSocketSettings()
    _SETTINGS[config] = settings
    return settings


class GatewayWebSocketProtocol(WebSocketsSansIOProtocol):
    """See the module docstring."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        settings = settings_of(config)
        if config.ws_per_message_deflate:
            # uvicorn's deflate at zlib level 1, not 6: a turn's created/completed events repeat the
            # request's instructions and tools (tens of KB), and level 6 spent ~0.5 ms per such frame
            # for a few hundred bytes less (bench/ws_turns.py); 4 KiB windows as uvicorn's
            self.conn.available_extensions = [
                ServerPerMessageDeflateFactory(
                    server_max_window_bits=12,
                    client_max_window_bits=12,
                    compress_settings={"level": 1, "memLevel": 5},
                )
            ]
        limit = settings.max_message_bytes if settings.max_message_bytes > 0 else None
        # websockets 16+ reads max_message_size (max_size became message + fragment limits), 13-15
        # max_size; an attribute it does not read would leave uvicorn's 16 MiB default in force.
        # setattr: mypy sees only the installed version's name
        name = "max_message_size" if hasattr(self.conn, "max_message_size") else "max_size"
        setattr(self.conn, name, limit)
        self.ping_interval = settings.ping_interval if settings.ping_interval > 0 else None
        self.ping_timeout = settings.ping_timeout if settings.ping_timeout > 0 else None
        self._told_shutdown = False

    def shutdown(self) -> None:
        accepted = self.handshake_complete and self.initial_response is None
        if accepted and not self.close_sent and not self.disconnected and not self._told_shutdown:
            self._told_shutdown = True  # the app closes after its running turn (a second call: at once)
            self.queue.put_nowait(cast(Any, {"type": SHUTDOWN}))  # (not an ASGI event: the gateway's own)
            return
        super().shutdown()
