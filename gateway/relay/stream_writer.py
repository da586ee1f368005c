"""Writing a caller's stream: keepalives during upstream silence and the idle-timeout watchdog.

One timer per stream (no task and no timeout reschedule per chunk): writes only stamp the time.
The timer is armed for the moment something may be owed — the next keepalive, ``keepalive_seconds``
after the last write, or the idle deadline, ``idle_timeout`` after the last upstream batch —
and, when it fires, compares against the stamps and arms itself again for whatever is owed next.
So a keepalive goes out ``keepalive_seconds`` after the last write, whatever the idle timeout (a
timer that ticked at a fixed period found a keepalive due only at the tick after it was owed:
up to twice as late). An upstream silent past its idle timeout gets the relay task cancelled
with ``idle_expired`` set, which the relay turns into an in-dialect timeout error.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from typing import Any

Send = Callable[[dict[str, Any]], Awaitable[None]]

_EARLY = 0.002  # a timer may fire a clock tick before its deadline: that counts as on time


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
        self._handle: asyncio.TimerHandle | None = None
        self._arm(self._last_write)

    def _arm(self, now: float) -> None:
        """Arm the timer for the next moment a keepalive or the idle deadline may be owed."""
        due = math.inf
        if self._keepalive:
            due = self._last_write + self._interval
            if due <= now:  # a write is under way (the relay's or a keepalive): look again an interval on
                due = now + self._interval
        if self._idle > 0:
            deadline = self.upstream_at + self._idle
            if deadline <= now:  # not waiting on the upstream (the relay is writing): look again later
                deadline = now + self._idle / 4
            due = min(due, deadline)
        self._handle = self._loop.call_at(due, self._tick) if due < math.inf else None

    def _tick(self) -> None:
        now = self._loop.time()
        if self.waiting and self._idle > 0 and now - self.upstream_at >= self._idle - _EARLY and self._task is not None:
            self.idle_expired = True
            self._task.cancel()
            self._handle = None
            return
        if (
            self._keepalive
            and not self._busy
            and self._pending is None
            and now - self._last_write >= self._interval - _EARLY
        ):
            self._pending = self._loop.create_task(self._write_keepalive())
        self._arm(now)

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
