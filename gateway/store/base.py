"""The store: what outlives one request (stored interactions/responses and their event logs).

One small async interface, two backends chosen by the ``[store] url`` scheme (``open_store`` in
``gateway.store.open``: this module knows none of its implementations):

* ``sqlite:///relative/path.db``, ``sqlite:////abs/path.db``, ``sqlite://:memory:`` — the
  embedded default, so ``make run`` needs nothing else (several uvicorn workers on one file work:
  they see each other's appends by polling);
* ``redis://host:port/db`` (also ``rediss://``, ``unix://``) — for replicas: any replica can
  resume a stream another one runs, because the live tail is read from Redis, not from the task;
  ``redis+sentinel://…`` and ``redis+cluster://…`` are the highly available kinds
  (``gateway/store/redis_client.py``).

Why the interface looks like this (see DESIGN.md "Stateful streams"):

* A detached generation *claims* its stream id, then ``append``\\ s every encoded event while it
  streams and calls ``heartbeat`` about every second; when done it ``put``\\ s the final object and
  ``finish``\\ es the log. Sequence numbers are dense, 0, 1, 2… in append order, so the relay can
  use them as ``event_id`` / ``sequence_number`` (the single owner knows the next one: it is the
  number of events it appended; pass it as ``expect=`` to have the store check it).
* A resume calls ``follow(id, after)``: the stored events after ``after``, then the live tail,
  each exactly once, ending when the log is finished. A dead owner cannot finish its log, so
  ``follow`` raises :class:`OwnerGone` when :class:`Liveness` judges the owner gone: a waiting
  caller gets an in-dialect error within seconds instead of hanging, and a live owner — one in
  the follower's own process, or one whose event loop merely stalled — is never given up.
* ``cancel`` may arrive at any replica: ``request_cancel`` records it in the store and the owner
  learns it from ``heartbeat`` (which returns the flag) or ``cancel_requested``.

The store writes only what it is given: honouring ``store: false`` (not calling it at all) is the
caller's job. Everything expires ``ttl_seconds`` after its last write (objects, logs, events);
a running stream refreshes its log's expiry on every append and heartbeat.
"""

from __future__ import annotations

import abc
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from gateway.store.counters import Ask, Settlement, Verdict
from gateway.store.shared import LocalShared, SharedState

__all__ = ["Liveness", "LogClosed", "LogStatus", "OwnerGone", "Store", "StoreError"]


class StoreError(Exception):
    """Base class of the store's own errors."""


class OwnerGone(StoreError):
    """A followed log is unfinished and its owner stopped heart-beating: it will never finish."""


class LogClosed(StoreError):
    """``append`` on a finished log, or ``expect=`` did not match (a second writer exists)."""


@dataclass(frozen=True, slots=True)
class LogStatus:
    """What a relay needs to decide how to answer a resume or a cancel."""

    finished: bool
    status: str | None  # the status given to ``finish`` (e.g. "completed", "cancelled")
    owner: str | None  # who claimed it (a replica/task id), None if never claimed
    heartbeat_age: float | None  # seconds since the owner's last heartbeat (store's clock)
    count: int  # events appended so far; the next sequence number
    cancel_requested: bool
    heartbeat_at: float | None = None  # the last heartbeat's stamp (store's clock): tells a renewal


class Liveness:
    """Whether the owner of a followed, unfinished log is gone. The rule, in order:

    1. ``owner_alive()`` is True — the owner is a task of the follower's own process and it is
       running — then it is alive, whatever its heartbeat says: a process knows its own tasks,
       and a busy event loop delays heartbeats of generations that are fine.
    2. Otherwise the heartbeat is judged. Its age is measured on the store's clock (Redis
       ``TIME``; for SQLite the one machine's clock), so a follower's own pauses cannot age it.
       Younger than ``dead_after``: alive. An event received is a sign of life too (the age is
       the younger of the heartbeat's and the last event's); a log never claimed is judged by
       the time since this follower last received an event.
    3. Older than ``dead_after`` is only a suspicion. The owner is gone when a later look, at
       least ``confirm`` (``dead_after / 4``) seconds of the follower's own clock after the
       first stale one, finds the SAME heartbeat, still stale: the lease was not renewed while we
       watched. Any renewal clears the suspicion.

    Why: the owner renews every second (``stateful.HEARTBEAT_SECONDS``), so a stale heartbeat
    means its event loop has not run for ``dead_after`` seconds or its process is gone. Rule 3
    keeps one stale snapshot — taken right after the follower itself, or the whole machine, was
    paused — from failing a generation that renews a moment later. A live owner survives
    event-loop stalls up to about ``dead_after`` + ``confirm`` seconds (10 s with the default
    ``[store] owner_timeout_seconds = 8``); a killed one is given up that long after its last
    heartbeat, plus one look (≤ 1 s).
    """

    __slots__ = ("dead_after", "confirm", "owner_alive", "_suspect_beat", "_suspect_at")

    def __init__(self, dead_after: float, owner_alive: Callable[[], bool] | None = None) -> None:
        self.dead_after = dead_after
        self.confirm = dead_after / 4
        self.owner_alive = owner_alive
        self._suspect_beat: float | None = None
        self._suspect_at: float | None = None

    def gone(self, beat: float | None, age: float) -> bool:
        """One look: ``beat`` identifies the heartbeat seen (None when never claimed), ``age`` is
        how stale it is."""
        if age <= self.dead_after or (self.owner_alive is not None and self.owner_alive()):
            self._suspect_at = None
            return False
        now = time.monotonic()
        if self._suspect_at is None or beat != self._suspect_beat:
            self._suspect_at, self._suspect_beat = now, beat
            return False
        return now - self._suspect_at >= self.confirm


class Store(abc.ABC):
    """The async store interface. All methods are safe to call concurrently from one event loop."""

    ttl_seconds: float

    # -- objects: stored interactions / responses (JSON-able dicts) ------------------------------

    @abc.abstractmethod
    async def put(self, kind: str, id: str, obj: dict[str, Any]) -> None:
        """Store (or replace) ``obj`` under (kind, id); it expires ``ttl_seconds`` from now."""

    @abc.abstractmethod
    async def get(self, kind: str, id: str) -> dict[str, Any] | None:
        """The stored object, or None if absent or expired."""

    @abc.abstractmethod
    async def delete(self, kind: str, id: str) -> bool:
        """Remove the object and the event log of the same id; True if the object existed."""

    # -- event logs, one per stream id ------------------------------------------------------------

    @abc.abstractmethod
    async def append(self, stream_id: str, data: bytes, *, expect: int | None = None) -> int:
        """Append one encoded event; returns its sequence number (0, 1, 2…).

        Raises :class:`LogClosed` if the log is finished or, when ``expect`` is given, if the
        next sequence number is not ``expect`` (someone else writes to this log).
        """

    @abc.abstractmethod
    async def finish(self, stream_id: str, status: str) -> None:
        """Mark the log complete (idempotent: a second call keeps the first status)."""

    @abc.abstractmethod
    async def events_after(self, stream_id: str, after: int | None) -> list[tuple[int, bytes]]:
        """The stored events with sequence number > ``after`` (all of them if None), in order."""

    @abc.abstractmethod
    def follow(
        self,
        stream_id: str,
        after: int | None,
        *,
        poll: float = 0.05,
        dead_after: float = 8.0,
        owner_alive: Callable[[], bool] | None = None,
    ) -> AsyncIterator[tuple[int, bytes]]:
        """Yield the events after ``after``, then the live tail, each exactly once; return when
        the log is finished. Raise :class:`OwnerGone` when the log is unfinished and
        :class:`Liveness` (``dead_after``, ``owner_alive``) judges its owner gone. An ``after``
        past the end yields nothing.

        ``poll`` is how often to look for appends made by other processes (SQLite; in-process
        appends wake followers at once). Redis wakes followers itself (XREAD BLOCK).
        """

    @abc.abstractmethod
    async def log_status(self, stream_id: str) -> LogStatus | None:
        """The log's state, or None if there is no such log (never claimed nor appended)."""

    # -- ownership, liveness, cancellation ----------------------------------------------------------

    @abc.abstractmethod
    async def claim(self, stream_id: str, owner: str) -> None:
        """Record ``owner`` as the task running this stream and heartbeat it now. Call it before
        answering the caller with the id, so a resume never finds an unclaimed log."""

    @abc.abstractmethod
    async def heartbeat(self, stream_id: str, owner: str) -> bool:
        """Refresh the owner's heartbeat (call every ~1 s); returns whether a cancel was
        requested, so the running task needs one round trip per second, not two."""

    @abc.abstractmethod
    async def request_cancel(self, stream_id: str) -> bool:
        """Ask the owner (on any replica) to stop; True if the log exists and is unfinished."""

    @abc.abstractmethod
    async def cancel_requested(self, stream_id: str) -> bool:
        """Whether ``request_cancel`` was called for this stream."""

    # -- limits and spend (gateway/store/counters.py says what they hold) -----------------------------

    requests_kept: int = 10000  # request records kept for GET /admin/requests

    @abc.abstractmethod
    async def reserve(self, ask: Ask) -> Verdict:
        """Check every limit of ``ask`` and hold it, atomically across processes, or hold nothing."""

    @abc.abstractmethod
    async def settle(self, items: list[Settlement]) -> list[int]:
        """Release each hold, add the real tokens and cost, record spend buckets and the request
        record; returns each item's period spend afterwards (nano-USD; 0 without a period)."""

    @abc.abstractmethod
    async def budget_state(self, key: str, period: str) -> tuple[int, int]:
        """(spent, held) nano-USD of ``key`` in budget ``period``."""

    @abc.abstractmethod
    async def spend_buckets(self, start_hour: int, end_hour: int, key: str | None) -> list[tuple[Any, ...]]:
        """Hourly spend rows ``(hour, key, model, provider, route, *SPEND_FIELDS)`` with
        ``start_hour <= hour < end_hour``, of one key when given. Kept without expiry."""

    @abc.abstractmethod
    async def recent_requests(self, key: str | None, limit: int) -> list[dict[str, Any]]:
        """The newest request records first (of one key when given)."""

    @abc.abstractmethod
    async def key_records(self) -> dict[str, dict[str, Any]]:
        """Every key record written by the admin API (name → record)."""

    @abc.abstractmethod
    async def put_key_record(self, name: str, record: dict[str, Any]) -> None:
        """Store a key record and move the key version (every replica reloads)."""

    @abc.abstractmethod
    async def key_version(self) -> int:
        """A number that changes whenever a key record changes (polled by every replica)."""

    # -- the response cache (gateway/relay/cache.py): opaque entries with their own TTL ----------------

    @abc.abstractmethod
    async def cache_get(self, key: str) -> bytes | None:
        """The cached entry under ``key``, or None if absent or past its TTL."""

    @abc.abstractmethod
    async def cache_put(self, key: str, body: bytes, ttl_seconds: float, max_entries: int) -> None:
        """Keep ``body`` under ``key`` for ``ttl_seconds``; beyond ``max_entries`` entries the
        oldest go (checked every few puts, so the bound may be passed by a few for a moment)."""

    # -- housekeeping ---------------------------------------------------------------------------------

    @abc.abstractmethod
    async def expire(self) -> int:
        """Delete entries past their TTL; returns how many rows/keys went. SQLite also does it on
        open and every minute by itself; Redis uses key TTLs and returns 0."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Release connections/threads. The store must not be used afterwards."""

    # -- routing state (cooldowns, in-flight counts, session pins: gateway/store/shared.py) ----------

    def shared(self) -> SharedState:
        """The routing state every replica using this store sees. In process memory by default
        (one process has nobody to share with); Redis overrides it with keys in Redis."""
        state = self.__dict__.get("_shared_state")
        if state is None:
            state = self.__dict__["_shared_state"] = LocalShared()
        return state
