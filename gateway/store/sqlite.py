"""SQLite backend: the embedded default (stdlib ``sqlite3``, no extra dependency).

Why it is built this way:

* Every call but one runs on one dedicated worker thread that owns the connection, so the event
  loop never blocks on disk and sqlite3's one-thread-per-connection rule holds without locks.
  Appends queued meanwhile go in one transaction (one commit and one thread hop for many live
  streams). The exception is a named key's reserve (``SQLiteCounters.reserve``): a few
  microseconds of SQL, run on the event loop's own connection, cheaper than the hop; it moves to
  the worker only while another process holds the write lock.
* WAL mode with ``synchronous=NORMAL``: readers never block the writer, and a commit costs no
  fsync (a crash may lose the last few events, never corrupt the file) — an append per event
  stays cheap.
* Followers in this process are woken at once by an ``asyncio.Event`` set after each append or
  finish; followers in other processes (several uvicorn workers on one file) poll every ``poll``
  seconds. One read transaction returns both the finished flag and the events, so the end is
  never seen before the events written before it.
* TTL: ``expires_at`` columns, filtered on every read and purged by ``expire()`` — on open and
  at most once a minute after a write, so nobody has to schedule it.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import orjson

from gateway.store.base import Liveness, LogClosed, LogStatus, OwnerGone, Store
from gateway.store.sqlite_counters import SCHEMA as COUNTERS_SCHEMA
from gateway.store.sqlite_counters import SQLiteCounters

T = TypeVar("T")

_BATCH = 1000  # events read per query while replaying
_EXPIRE_EVERY = 60.0  # seconds between automatic purges
_CACHE_TRIM_EVERY = 32  # response-cache puts between two checks of its entry bound

_SCHEMA = """
CREATE TABLE IF NOT EXISTS objects (
    kind TEXT NOT NULL, id TEXT NOT NULL, body BLOB NOT NULL, expires_at REAL NOT NULL,
    PRIMARY KEY (kind, id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS objects_expiry ON objects (expires_at);
CREATE TABLE IF NOT EXISTS logs (
    id TEXT PRIMARY KEY, owner TEXT, heartbeat REAL, finished INTEGER NOT NULL DEFAULT 0,
    status TEXT, cancel INTEGER NOT NULL DEFAULT 0, count INTEGER NOT NULL DEFAULT 0,
    expires_at REAL NOT NULL) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS logs_expiry ON logs (expires_at);
CREATE TABLE IF NOT EXISTS cache (
    key TEXT PRIMARY KEY, body BLOB NOT NULL, stored_at REAL NOT NULL, expires_at REAL NOT NULL) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS cache_age ON cache (stored_at);
CREATE TABLE IF NOT EXISTS events (
    id TEXT NOT NULL, seq INTEGER NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY (id, seq)) WITHOUT ROWID;
"""


def sqlite_path(url: str) -> str:
    """``sqlite:///rel.db`` → ``rel.db``; ``sqlite:////abs.db`` → ``/abs.db``;
    ``sqlite://:memory:`` (or ``sqlite:///:memory:``) → ``:memory:``."""
    if not url.lower().startswith("sqlite://"):
        raise ValueError(f"not a sqlite url: {url!r}")
    rest = url[len("sqlite://") :]
    if rest in (":memory:", "/:memory:"):
        return ":memory:"
    if not rest.startswith("/") or len(rest) < 2:
        raise ValueError(f"sqlite url needs a path: sqlite:///relative.db or sqlite:////abs.db, got {url!r}")
    return rest[1:]


class SQLiteStore(SQLiteCounters, Store):
    """One SQLite file (or ``:memory:``) behind the :class:`Store` interface."""

    def __init__(self, path: str, ttl_seconds: float) -> None:
        self.path = path
        self.ttl_seconds = ttl_seconds
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gw-sqlite")
        self._db: sqlite3.Connection | None = None
        self._last_expire = 0.0
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self._pending: list[tuple[str, bytes, int | None, asyncio.Future[int]]] = []
        self._drainer: asyncio.Task[None] | None = None
        if path == ":memory:":
            from gateway.store.memory_counters import MemoryCounters

            self._memory = MemoryCounters()
        # Opening is quick and happens once at startup: do it now so a bad path fails early.
        try:
            self._pool.submit(self._open).result()
        except BaseException:
            self._pool.shutdown(wait=False)
            raise

    # -- worker-thread side ---------------------------------------------------------------------------

    def _open(self) -> None:
        if self.path != ":memory:":
            parent = os.path.dirname(os.path.abspath(self.path))
            os.makedirs(parent, exist_ok=True)
        db = sqlite3.connect(self.path, isolation_level=None, timeout=10.0)
        if self.path != ":memory:":
            db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(_SCHEMA)
        db.executescript(COUNTERS_SCHEMA)
        self._db = db
        self._expire(time.time())

    def _tx(self, fn: Callable[[sqlite3.Connection], T], immediate: bool = True) -> T:
        """Run ``fn`` in one transaction (IMMEDIATE for writes: no lock upgrade deadlocks)."""
        db = self._db
        assert db is not None, "store is closed"
        db.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
        try:
            out = fn(db)
        except BaseException:
            if db.in_transaction:  # some errors (disk full) have rolled back already
                db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return out

    def _maybe_expire(self, now: float) -> None:
        if now - self._last_expire >= _EXPIRE_EVERY:
            self._expire(now)

    def _expire(self, now: float) -> int:
        def run(db: sqlite3.Connection) -> int:
            n = db.execute("DELETE FROM objects WHERE expires_at <= ?", (now,)).rowcount
            n += db.execute(
                "DELETE FROM events WHERE id IN (SELECT id FROM logs WHERE expires_at <= ?)", (now,)
            ).rowcount
            n += db.execute("DELETE FROM logs WHERE expires_at <= ?", (now,)).rowcount
            n += db.execute("DELETE FROM cache WHERE expires_at <= ?", (now,)).rowcount
            return n

        self._last_expire = now
        return self._tx(run)

    def _append_many(self, items: list[tuple[str, bytes, int | None]], now: float) -> list[int | LogClosed]:
        """Append a batch in one transaction (group commit); a refused item does not fail the others."""
        exp = now + self.ttl_seconds

        def one(db: sqlite3.Connection, sid: str, data: bytes, expect: int | None) -> int:
            row = db.execute("SELECT finished, count FROM logs WHERE id = ?", (sid,)).fetchone()
            count = row[1] if row else 0
            if row and row[0]:
                raise LogClosed(f"log {sid!r} is finished")
            if expect is not None and expect != count:
                raise LogClosed(f"log {sid!r}: next sequence number is {count}, not {expect}")
            if row:
                db.execute("UPDATE logs SET count = ?, expires_at = ? WHERE id = ?", (count + 1, exp, sid))
            else:
                db.execute("INSERT INTO logs (id, count, expires_at) VALUES (?, 1, ?)", (sid, exp))
            db.execute("INSERT INTO events (id, seq, data) VALUES (?, ?, ?)", (sid, count, data))
            return count

        def run(db: sqlite3.Connection) -> list[int | LogClosed]:
            out: list[int | LogClosed] = []
            for sid, data, expect in items:
                try:
                    out.append(one(db, sid, data, expect))
                except LogClosed as exc:  # raised before that item wrote anything
                    out.append(exc)
            return out

        results = self._tx(run)
        self._maybe_expire(now)
        return results

    def _finish(self, sid: str, status: str, now: float) -> None:
        exp = now + self.ttl_seconds

        def run(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT INTO logs (id, finished, status, expires_at) VALUES (?, 1, ?, ?) "
                "ON CONFLICT (id) DO UPDATE SET finished = 1, expires_at = excluded.expires_at, "
                "status = CASE WHEN logs.finished THEN logs.status ELSE excluded.status END",
                (sid, status, exp),
            )

        self._tx(run)

    def _read(self, sid: str, after: int, limit: int, now: float) -> tuple[bool, float | None, list[tuple[int, bytes]]]:
        """(finished, heartbeat, events after ``after``) from one snapshot."""

        def run(db: sqlite3.Connection) -> tuple[bool, float | None, list[tuple[int, bytes]]]:
            row = db.execute(
                "SELECT finished, heartbeat FROM logs WHERE id = ? AND expires_at > ?", (sid, now)
            ).fetchone()
            if row is None:
                return False, None, []
            rows = db.execute(
                "SELECT seq, data FROM events WHERE id = ? AND seq > ? ORDER BY seq LIMIT ?", (sid, after, limit)
            ).fetchall()
            return bool(row[0]), row[1], rows

        return self._tx(run, immediate=False)

    def _status(self, sid: str, now: float) -> LogStatus | None:
        assert self._db is not None, "store is closed"
        row = self._db.execute(
            "SELECT finished, status, owner, heartbeat, count, cancel FROM logs WHERE id = ? AND expires_at > ?",
            (sid, now),
        ).fetchone()
        if row is None:
            return None
        age = None if row[3] is None else max(0.0, now - row[3])
        return LogStatus(bool(row[0]), row[1], row[2], age, row[4], bool(row[5]), row[3])

    def _exec(self, sql: str, args: tuple[Any, ...]) -> int:
        """One write statement in autocommit mode; returns its rowcount."""
        assert self._db is not None, "store is closed"
        return self._db.execute(sql, args).rowcount

    def _one(self, sql: str, args: tuple[Any, ...]) -> Any:
        """First column of the first row, or None."""
        assert self._db is not None, "store is closed"
        row = self._db.execute(sql, args).fetchone()
        return None if row is None else row[0]

    # -- event-loop side --------------------------------------------------------------------------------

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def _wake(self, sid: str) -> None:
        for event in self._waiters.get(sid, ()):
            event.set()

    async def put(self, kind: str, id: str, obj: dict[str, Any]) -> None:
        now, body = time.time(), orjson.dumps(obj)

        def run() -> None:
            self._exec(
                "INSERT OR REPLACE INTO objects (kind, id, body, expires_at) VALUES (?, ?, ?, ?)",
                (kind, id, body, now + self.ttl_seconds),
            )
            self._maybe_expire(now)

        await self._run(run)

    async def get(self, kind: str, id: str) -> dict[str, Any] | None:
        body = await self._run(
            self._one, "SELECT body FROM objects WHERE kind = ? AND id = ? AND expires_at > ?", (kind, id, time.time())
        )
        return None if body is None else orjson.loads(body)

    async def delete(self, kind: str, id: str) -> bool:
        def run(db: sqlite3.Connection) -> bool:
            n = db.execute("DELETE FROM objects WHERE kind = ? AND id = ?", (kind, id)).rowcount
            db.execute("DELETE FROM events WHERE id = ?", (id,))
            db.execute("DELETE FROM logs WHERE id = ?", (id,))
            return n > 0

        gone: bool = await self._run(self._tx, run)
        self._wake(id)
        return gone

    async def append(self, stream_id: str, data: bytes, *, expect: int | None = None) -> int:
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._pending.append((stream_id, bytes(data), expect, fut))
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.create_task(self._drain())
        seq = await fut
        self._wake(stream_id)
        return seq

    async def _drain(self) -> None:
        """Write queued appends, all that queued meanwhile in one transaction: with many streams
        live, one commit and one thread hop serve many events (see the bench/README.md numbers)."""
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                results: list[int | LogClosed] | None = await self._run(
                    self._append_many, [(sid, data, exp) for sid, data, exp, _ in batch], time.time()
                )
                error: BaseException | None = None
            except Exception as exc:  # the whole transaction failed (disk full, closed store…)
                results, error = None, exc
            for i, (_, _, _, fut) in enumerate(batch):
                if fut.done():
                    continue
                res = results[i] if results is not None else error or RuntimeError("append failed")
                if isinstance(res, BaseException):
                    fut.set_exception(res)
                else:
                    fut.set_result(res)

    async def finish(self, stream_id: str, status: str) -> None:
        await self._run(self._finish, stream_id, status, time.time())
        self._wake(stream_id)

    async def events_after(self, stream_id: str, after: int | None) -> list[tuple[int, bytes]]:
        _, _, rows = await self._run(self._read, stream_id, -1 if after is None else after, -1, time.time())
        return rows

    async def follow(
        self,
        stream_id: str,
        after: int | None,
        *,
        poll: float = 0.05,
        dead_after: float = 8.0,
        owner_alive: Callable[[], bool] | None = None,
    ) -> AsyncIterator[tuple[int, bytes]]:
        last = -1 if after is None else after
        idle_since = time.time()  # for a log never claimed: judge liveness by its last event
        liveness = Liveness(dead_after, owner_alive)
        wake = asyncio.Event()
        self._waiters.setdefault(stream_id, set()).add(wake)
        try:
            while True:
                wake.clear()  # before the read: an append after it sets it again, none is lost
                finished, beat, rows = await self._run(self._read, stream_id, last, _BATCH, time.time())
                if rows:
                    idle_since = time.time()
                for seq, data in rows:
                    last = seq
                    yield seq, data
                if len(rows) == _BATCH:
                    continue
                if finished:
                    return
                if not rows and liveness.gone(
                    beat, time.time() - (idle_since if beat is None else max(beat, idle_since))
                ):
                    raise OwnerGone(f"stream {stream_id!r}: no heartbeat for over {dead_after:g}s")
                try:
                    await asyncio.wait_for(wake.wait(), poll)
                except TimeoutError:
                    pass
        finally:
            waiters = self._waiters.get(stream_id)
            if waiters is not None:
                waiters.discard(wake)
                if not waiters:
                    del self._waiters[stream_id]

    async def log_status(self, stream_id: str) -> LogStatus | None:
        return await self._run(self._status, stream_id, time.time())

    async def claim(self, stream_id: str, owner: str) -> None:
        now = time.time()
        await self._run(
            self._exec,
            "INSERT INTO logs (id, owner, heartbeat, expires_at) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO UPDATE "
            "SET owner = excluded.owner, heartbeat = excluded.heartbeat, expires_at = excluded.expires_at",
            (stream_id, owner, now, now + self.ttl_seconds),
        )

    async def heartbeat(self, stream_id: str, owner: str) -> bool:
        now = time.time()

        def run(db: sqlite3.Connection) -> bool:
            db.execute(
                "UPDATE logs SET heartbeat = ?, expires_at = ? WHERE id = ? AND owner = ?",
                (now, now + self.ttl_seconds, stream_id, owner),
            )
            row = db.execute("SELECT cancel FROM logs WHERE id = ?", (stream_id,)).fetchone()
            return bool(row and row[0])

        return await self._run(self._tx, run)

    async def request_cancel(self, stream_id: str) -> bool:
        n = await self._run(
            self._exec,
            "UPDATE logs SET cancel = 1 WHERE id = ? AND finished = 0 AND expires_at > ?",
            (stream_id, time.time()),
        )
        return n > 0

    async def cancel_requested(self, stream_id: str) -> bool:
        flag = await self._run(
            self._one, "SELECT cancel FROM logs WHERE id = ? AND expires_at > ?", (stream_id, time.time())
        )
        return bool(flag)

    async def cache_get(self, key: str) -> bytes | None:
        body: bytes | None = await self._run(
            self._one, "SELECT body FROM cache WHERE key = ? AND expires_at > ?", (key, time.time())
        )
        return body

    async def cache_put(self, key: str, body: bytes, ttl_seconds: float, max_entries: int) -> None:
        now = time.time()
        self._cache_puts = getattr(self, "_cache_puts", 0) + 1
        trim = self._cache_puts % _CACHE_TRIM_EVERY == 0 or max_entries < _CACHE_TRIM_EVERY

        def run() -> None:
            self._exec(
                "INSERT OR REPLACE INTO cache (key, body, stored_at, expires_at) VALUES (?, ?, ?, ?)",
                (key, body, now, now + ttl_seconds),
            )
            if trim:  # the oldest beyond the bound (an index walk: not on every put)
                self._exec(
                    "DELETE FROM cache WHERE key IN (SELECT key FROM cache ORDER BY stored_at DESC LIMIT -1 OFFSET ?)",
                    (max_entries,),
                )
            self._maybe_expire(now)

        await self._run(run)

    async def expire(self) -> int:
        return await self._run(self._expire, time.time())

    async def close(self) -> None:
        def shut() -> None:
            if self._db is not None:
                self._db.close()
                self._db = None

        if self._drainer is not None:
            await self._drainer
        self._close_inline()
        await self._run(shut)
        self._pool.shutdown(wait=False)
