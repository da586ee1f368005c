"""Writing a caller's stream: keepalives during upstream silence and the idle-timeout watchdog.

One timer per stream (no task and no timeout reschedule per chunk): every tick it looks at two
timestamps the relay keeps current — the last write to the caller and the last batch from the
upstream. A silent caller connection gets the encoder's keepalive bytes; an upstream silent past
its idle timeout gets the relay task cancelled with ``idle_expired`` set, which the relay turns
into an in-dialect timeout error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

Send = Callable[[dict[str, Any]], Awaitable[None]]


class StreamWriter:
    def __init__(self, send: Send, keepalive: bytes, keepalive_interval: float, idle_timeout: float) -> None:
        self._send = send
        self._keepalive = keepalive if keepalive_interval > 0 else b""
        self._interval = keepalive_interval
        self._idle = idle_timeout
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        self._last_write = self._loop.time()
        self.upstream_at = self._last_write  # the relay sets this after every upstream batch
        self.waiting = False  # True while the relay awaits the upstream
        self.idle_expired = False
        self._pending: asyncio.Task[None] | None = None
        self._busy = False
        periods = [p for p in (keepalive_interval if self._keepalive else 0, idle_timeout / 4) if p > 0]
        self._tick_every = min(periods) if periods else 0
        self._handle = self._loop.call_later(self._tick_every, self._tick) if self._tick_every else None

    def _tick(self) -> None:
        now = self._loop.time()
        if self.waiting and self._idle > 0 and now - self.upstream_at >= self._idle and self._task is not None:
            self.idle_expired = True
            self._task.cancel()
            self._handle = None
            return
        if self._keepalive and not self._busy and self._pending is None and now - self._last_write >= self._interval:
            self._pending = self._loop.create_task(self._write_keepalive())
        self._handle = self._loop.call_later(self._tick_every, self._tick)

    async def _write_keepalive(self) -> None:
        try:
            await self._send({"type": "http.response.body", "body": self._keepalive, "more_body": True})
            self._last_write = self._loop.time()
        except Exception:  # the caller is gone: the disconnect watcher cancels the relay
            pass
        finally:
            self._pending = None

    async def write(self, body: bytes, more: bool = True) -> None:
        if self._pending is not None:
            await self._pending
        self._busy = True
        try:
            await self._send({"type": "http.response.body", "body": body, "more_body": more})
        finally:
            self._busy = False
        self._last_write = self._loop.time()

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self._pending is not None:
            self._pending.cancel()
