"""Limits and spend on SQLite: each reserve and each batch of settlements is one ``BEGIN IMMEDIATE``
transaction, so several ``--workers`` on one file see one set of counters and no request slips
between another's check and its write. A key's live state (leases, windows, holds) is one row
(gateway/store/key_state.py): a reserve writes one page. Spend tables have no TTL: they are the ledger.

Mixed into ``SQLiteStore`` (gateway/store/sqlite.py), whose worker thread runs every statement
but the reserves and the settling of a route target's hold: those run on a connection of the
event loop's own thread (``reserve``), and go to the worker only when another process holds the
write lock past ``INLINE_BUSY_SECONDS``.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from gateway.store import key_state
from gateway.store.counters import Ask, Settlement, Verdict, hour_of, settlement_values
from gateway.store.memory_counters import MemoryCounters

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS rl_state (key TEXT PRIMARY KEY, state BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS budgets (
    key TEXT NOT NULL, period TEXT NOT NULL, spent INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (key, period)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS spend (
    hour INTEGER NOT NULL, key TEXT NOT NULL, model TEXT NOT NULL, provider TEXT NOT NULL, route TEXT NOT NULL,
    requests INTEGER NOT NULL, input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL,
    cache_read_tokens INTEGER NOT NULL, cache_write_tokens INTEGER NOT NULL, reasoning_tokens INTEGER NOT NULL,
    cost_nano INTEGER NOT NULL, unpriced_requests INTEGER NOT NULL,
    PRIMARY KEY (hour, key, model, provider, route)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS request_log (seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, body BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS request_log_key ON request_log (key, seq);
CREATE TABLE IF NOT EXISTS key_records (name TEXT PRIMARY KEY, body BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS key_version (id INTEGER PRIMARY KEY CHECK (id = 0), v INTEGER NOT NULL);
"""

INLINE_BUSY_SECONDS = 0.005  # the longest a reserve may block the event loop on another process's write lock

_UPSERT_SPEND = (
    "INSERT INTO spend VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (hour, key, model, provider, route) DO UPDATE SET "
    "requests = requests + excluded.requests, input_tokens = input_tokens + excluded.input_tokens, "
    "output_tokens = output_tokens + excluded.output_tokens, cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens, "
    "cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens, reasoning_tokens = reasoning_tokens + excluded.reasoning_tokens, "
    "cost_nano = cost_nano + excluded.cost_nano, unpriced_requests = unpriced_requests + excluded.unpriced_requests"
)
_ADD_BUDGET = "INSERT INTO budgets (key, period, spent) VALUES (?, ?, ?) ON CONFLICT (key, period) DO UPDATE SET spent = spent + excluded.spent"


_RESERVE_READ = (
    "SELECT (SELECT spent FROM budgets WHERE key = ? AND period = ?), (SELECT state FROM rl_state WHERE key = ?)"
)


def _load(db: sqlite3.Connection, key: str) -> key_state.State:
    row = db.execute("SELECT state FROM rl_state WHERE key = ?", (key,)).fetchone()
    return orjson.loads(row[0]) if row else key_state.new_state()


def _save(db: sqlite3.Connection, key: str, st: key_state.State) -> None:
    db.execute("INSERT OR REPLACE INTO rl_state VALUES (?, ?)", (key, orjson.dumps(st)))


def _inline_tx(db: sqlite3.Connection, run: Callable[[sqlite3.Connection], T]) -> T:
    """``run`` in one ``BEGIN IMMEDIATE`` transaction on the event loop's own connection."""
    db.execute("BEGIN IMMEDIATE")
    try:
        out = run(db)
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
    return out


_WORKER_GROUPS: set[asyncio.Future[None]] = set()


def _resolve(group: list[tuple[Ask, asyncio.Future[Verdict]]], verdicts: list[Verdict]) -> None:
    for (_, future), verdict in zip(group, verdicts):
        if not future.done():
            future.set_result(verdict)


def _fail(group: list[tuple[Ask, asyncio.Future[Verdict]]], exc: BaseException) -> None:
    for _, future in group:
        if not future.done():
            future.set_exception(exc)


class SQLiteCounters:
    """The limits-and-spend half of ``SQLiteStore``. For ``:memory:`` it hands everything to
    ``MemoryCounters`` (one process by definition: no SQL, no thread hop)."""

    requests_kept: int = 10000
    _memory: MemoryCounters | None = None
    _inline_db: sqlite3.Connection | None = None
    _inline_failed: bool = False
    _pending_reserves: list[tuple[Ask, asyncio.Future[Verdict]]] | None = None
    path: str

    if TYPE_CHECKING:  # provided by SQLiteStore

        def _tx(self, fn: Callable[[sqlite3.Connection], T], immediate: bool = True) -> T: ...

        async def _run(self, fn: Callable[..., T], *args: Any) -> T: ...

    # -- worker-thread side ----------------------------------------------------------------------

    def _inline(self) -> sqlite3.Connection | None:
        """A connection of the event loop's own thread, for reserves (see ``reserve``)."""
        if self._inline_db is None and not self._inline_failed:
            try:
                db = sqlite3.connect(self.path, isolation_level=None, timeout=INLINE_BUSY_SECONDS)
                db.execute("PRAGMA synchronous=NORMAL")
                # no checkpoint on the loop: one writes the WAL's pages back and syncs the file
                # (milliseconds); the worker's connection, which commits every settlement batch, runs them
                db.execute("PRAGMA wal_autocheckpoint=0")
                self._inline_db = db
            except sqlite3.Error:
                self._inline_failed = True
        return self._inline_db

    def _close_inline(self) -> None:
        if self._inline_db is not None:
            self._inline_db.close()
            self._inline_db = None

    def _reserve_many(self, asks: list[Ask], db: sqlite3.Connection | None = None) -> list[Verdict]:
        """Every reserve of one event-loop turn in one ``BEGIN IMMEDIATE`` transaction, in the order
        they were asked: exactly what running them one after another would decide (a budget's spend
        changes only on settlement, so it is read once per key and period), but one lock, one commit,
        one read and one write of each key's state for all of them."""

        def run(db: sqlite3.Connection) -> list[Verdict]:
            states: dict[str, list[Any]] = {}  # key -> [state, changed]
            spent_of: dict[tuple[str, str], int] = {}
            out = []
            for ask in asks:
                entry = states.get(ask.key)
                if entry is None:
                    # the budget's spend and the key's state in one statement
                    spent, blob = db.execute(_RESERVE_READ, (ask.key, ask.period, ask.key)).fetchone()
                    spent_of[(ask.key, ask.period)] = spent or 0
                    entry = states[ask.key] = [orjson.loads(blob) if blob is not None else key_state.new_state(), False]
                spent = spent_of.get((ask.key, ask.period))
                if spent is None:
                    row = db.execute(
                        "SELECT spent FROM budgets WHERE key = ? AND period = ?", (ask.key, ask.period)
                    ).fetchone()
                    spent = spent_of[(ask.key, ask.period)] = row[0] if row else 0
                st = entry[0]
                if not entry[1] and any(held[0] <= ask.now for held in st["l"].values()):
                    entry[1] = True  # expired leases are released even when this ask is refused
                v = key_state.reserve(st, ask, spent)
                if v.ok:
                    entry[1] = True
                out.append(v)
            for key, (st, changed) in states.items():
                if changed:
                    _save(db, key, st)
            return out

        return self._tx(run) if db is None else _inline_tx(db, run)

    def _settle(self, items: list[Settlement], db: sqlite3.Connection | None = None) -> list[int]:
        def run(db: sqlite3.Connection) -> list[int]:
            out = []
            states: dict[str, key_state.State] = {}
            # one upsert per spend bucket and one multi-row insert of the request records for the
            # whole batch, not a statement each per request (a batch is every request of ~10 ms)
            buckets: dict[tuple[int, str, str, str, str], list[int]] = {}
            logged: list[tuple[str, bytes]] = []
            for s in items:
                if s.hold is not None:
                    st = states.get(s.key)
                    if st is None:
                        st = states[s.key] = _load(db, s.key)
                    key_state.settle(st, s)
                spent = 0
                if s.period:
                    spent = db.execute(_ADD_BUDGET + " RETURNING spent", (s.key, s.period, s.cost_nano)).fetchone()[0]
                if s.counted:
                    bucket = (hour_of(s.now), s.key, s.model, s.provider, s.route)
                    values = settlement_values(s)
                    summed = buckets.get(bucket)
                    if summed is None:
                        buckets[bucket] = list(values)
                    else:
                        for i, v in enumerate(values):
                            summed[i] += v
                if s.logged:
                    logged.append((s.key, orjson.dumps(s.record)))
                out.append(spent)
            if buckets:
                db.executemany(_UPSERT_SPEND, [(*bucket, *values) for bucket, values in buckets.items()])
            for key, st in states.items():
                _save(db, key, st)
            if logged:
                db.executemany("INSERT INTO request_log (key, body) VALUES (?, ?)", logged)
                last = db.execute("SELECT last_insert_rowid()").fetchone()[0] or 0
                if last // 100 != (last - len(logged)) // 100:  # now and then (every 100th record), not on every write
                    db.execute(
                        "DELETE FROM request_log WHERE seq <= (SELECT MAX(seq) FROM request_log) - ?",
                        (self.requests_kept,),
                    )
            return out

        return self._tx(run) if db is None else _inline_tx(db, run)

    # -- event-loop side -----------------------------------------------------------------------------

    async def reserve(self, ask: Ask) -> Verdict:
        """Group commit: the reserves asked during one event-loop turn run together at the start of
        the next (``_flush_reserves``), in one transaction on the event loop's own connection: a
        reserve is a few microseconds of SQLite, less than the hop to the store's worker thread
        (which under load costs milliseconds of waiting), and most of those microseconds are the
        transaction's lock and commit and the key state's JSON, which concurrent requests of one key
        then share. If another process holds the write lock for more than ``INLINE_BUSY_SECONDS``,
        the group goes to the worker thread, which may wait for it without blocking the loop."""
        if self._memory is not None:
            return self._memory.reserve(ask)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Verdict] = loop.create_future()
        pending = self._pending_reserves
        if pending is None:
            pending = self._pending_reserves = []
            loop.call_soon(self._flush_reserves)
        pending.append((ask, future))
        return await future

    def _flush_reserves(self) -> None:
        # a reserve whose request was cancelled while it waited is not made (it would hold a lease)
        group = [(ask, future) for ask, future in self._pending_reserves or () if not future.done()]
        self._pending_reserves = None
        if not group:
            return
        asks = [ask for ask, _ in group]
        db = self._inline()
        if db is not None:
            try:
                _resolve(group, self._reserve_many(asks, db))
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    _fail(group, exc)
                    return
            except Exception as exc:
                _fail(group, exc)
                return
        task = asyncio.ensure_future(self._reserve_on_worker(group))
        _WORKER_GROUPS.add(task)  # held until done (the loop keeps only a weak reference)
        task.add_done_callback(_WORKER_GROUPS.discard)

    async def _reserve_on_worker(self, group: list[tuple[Ask, asyncio.Future[Verdict]]]) -> None:
        try:
            verdicts = await self._run(self._reserve_many, [ask for ask, _ in group])
        except Exception as exc:
            _fail(group, exc)
        else:
            _resolve(group, verdicts)

    async def settle(self, items: list[Settlement]) -> list[int]:
        """The ledger's batches go to the worker thread (they write spend rows and request
        records); a route target's hold (``logged=False``: one row) is settled inline, as reserves are."""
        if self._memory is not None:
            return self._memory.settle(items)
        if all(not s.logged for s in items):
            return await self._inline_or_worker(self._settle, items)
        return await self._run(self._settle, items)

    async def _inline_or_worker(self, fn: Callable[[Any, sqlite3.Connection | None], T], arg: Any) -> T:
        db = self._inline()
        if db is not None:
            try:
                return fn(arg, db)
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
        return await self._run(fn, arg)

    async def budget_state(self, key: str, period: str) -> tuple[int, int]:
        if self._memory is not None:
            return self._memory.budget_state(key, period)

        def run(db: sqlite3.Connection) -> tuple[int, int]:
            row = db.execute("SELECT spent FROM budgets WHERE key = ? AND period = ?", (key, period)).fetchone()
            return (row[0] if row else 0, _load(db, key)["h"].get(period, 0))

        return await self._run(self._tx, run, False)

    async def spend_buckets(self, start_hour: int, end_hour: int, key: str | None) -> list[tuple[Any, ...]]:
        if self._memory is not None:
            return self._memory.spend_buckets(start_hour, end_hour, key)

        def run(db: sqlite3.Connection) -> list[tuple[Any, ...]]:
            sql = "SELECT * FROM spend WHERE hour >= ? AND hour < ?"
            args: tuple[Any, ...] = (start_hour, end_hour)
            if key is not None:
                sql, args = sql + " AND key = ?", args + (key,)
            return [tuple(r) for r in db.execute(sql, args).fetchall()]

        return await self._run(self._tx, run, False)

    async def recent_requests(self, key: str | None, limit: int) -> list[dict[str, Any]]:
        if self._memory is not None:
            return self._memory.recent_requests(key, limit)

        def run(db: sqlite3.Connection) -> list[dict[str, Any]]:
            if key is None:
                rows = db.execute("SELECT body FROM request_log ORDER BY seq DESC LIMIT ?", (limit,)).fetchall()
            else:
                rows = db.execute(
                    "SELECT body FROM request_log WHERE key = ? ORDER BY seq DESC LIMIT ?", (key, limit)
                ).fetchall()
            return [orjson.loads(r[0]) for r in rows]

        return await self._run(self._tx, run, False)

    async def key_records(self) -> dict[str, dict[str, Any]]:
        if self._memory is not None:
            return dict(self._memory.keys)

        def run(db: sqlite3.Connection) -> dict[str, dict[str, Any]]:
            return {name: orjson.loads(body) for name, body in db.execute("SELECT name, body FROM key_records")}

        return await self._run(self._tx, run, False)

    async def put_key_record(self, name: str, record: dict[str, Any]) -> None:
        if self._memory is not None:
            return self._memory.put_key_record(name, record)

        def run(db: sqlite3.Connection) -> None:
            db.execute("INSERT OR REPLACE INTO key_records VALUES (?, ?)", (name, orjson.dumps(record)))
            db.execute("INSERT INTO key_version VALUES (0, 1) ON CONFLICT (id) DO UPDATE SET v = v + 1")

        await self._run(self._tx, run)

    async def key_version(self) -> int:
        if self._memory is not None:
            return self._memory.version

        def run(db: sqlite3.Connection) -> int:
            row = db.execute("SELECT v FROM key_version WHERE id = 0").fetchone()
            return row[0] if row else 0

        return await self._run(self._tx, run, False)
