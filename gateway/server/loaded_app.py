"""The gateway settings behind a uvicorn ``Config``: what the connection protocols read their bounds from.

uvicorn builds a protocol per connection from its ``Config`` alone; the gateway app it serves (maybe
wrapped in middleware, each holding the next as ``.app``) carries the settings on ``app.state.gateway``.
Both the HTTP protocol (``protocol.limits_of``) and the WebSocket one (``ws_protocol.settings_of``)
find them here, once per config (they cache what they derive)."""

from __future__ import annotations

from uvicorn.config import Config

from gateway.settings import Settings


def app_settings(config: Config) -> Settings | None:
    """The settings of the gateway app this config serves; None for any other app (defaults apply)."""
    app = config.loaded_app
    while app is not None:
        state = getattr(getattr(app, "state", None), "gateway", None)
        if state is not None:
            settings = state.settings
            return settings if isinstance(settings, Settings) else None
        app = getattr(app, "app", None)
    return None
