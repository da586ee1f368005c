"""Limits and spend on SQLite: each reserve and each batch of settlements is one ``BEGIN IMMEDIATE``
transaction, so several ``--workers`` on one file see one set of counters and no request slips
between another's check and its write. Spend tables have no TTL: they are the ledger.

Mixed into ``SQLiteStore`` (gateway/store/sqlite.py), whose worker thread runs every statement.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

import orjson

from gateway.store.memory_counters import MemoryCounters
from gateway.store.counters import Ask, Settlement, Verdict, decide, hour_of, minute_of, settlement_values

SCHEMA = """
CREATE TABLE IF NOT EXISTS rl_windows (
    key TEXT NOT NULL, kind TEXT NOT NULL, minute INTEGER NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (key, kind, minute)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rl_leases (
    key TEXT NOT NULL, lease TEXT NOT NULL, expires REAL NOT NULL, tokens INTEGER NOT NULL,
    cost INTEGER NOT NULL, period TEXT NOT NULL, minute INTEGER NOT NULL,
    PRIMARY KEY (key, lease)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS budgets (
    key TEXT NOT NULL, period TEXT NOT NULL, spent INTEGER NOT NULL DEFAULT 0, held INTEGER NOT NULL DEFAULT 0,
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

_UPSERT_SPEND = (
    "INSERT INTO spend VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (hour, key, model, provider, route) DO UPDATE SET "
    "requests = requests + excluded.requests, input_tokens = input_tokens + excluded.input_tokens, "
    "output_tokens = output_tokens + excluded.output_tokens, cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens, "
    "cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens, reasoning_tokens = reasoning_tokens + excluded.reasoning_tokens, "
    "cost_nano = cost_nano + excluded.cost_nano, unpriced_requests = unpriced_requests + excluded.unpriced_requests"
)
_ADD_WINDOW = "INSERT INTO rl_windows VALUES (?, ?, ?, ?) ON CONFLICT (key, kind, minute) DO UPDATE SET n = n + excluded.n"
_ADD_BUDGET = (
    "INSERT INTO budgets (key, period, spent, held) VALUES (?, ?, ?, ?) ON CONFLICT (key, period) DO UPDATE SET "
    "spent = spent + excluded.spent, held = MAX(held + excluded.held, 0)"
)


def _release(db: sqlite3.Connection, key: str, lease: str) -> None:
    """Drop one lease and give back what it held (nothing if it is already gone)."""
    row = db.execute("DELETE FROM rl_leases WHERE key = ? AND lease = ? RETURNING tokens, cost, period, minute", (key, lease)).fetchone()
    if row is None:
        return
    tokens, cost, period, minute = row
    if cost and period:
        db.execute(_ADD_BUDGET, (key, period, 0, -cost))
    if tokens:
        db.execute("UPDATE rl_windows SET n = MAX(n - ?, 0) WHERE key = ? AND kind = 't' AND minute = ?", (tokens, key, minute))


class SQLiteCounters:
    """The limits-and-spend half of ``SQLiteStore``. For ``:memory:`` it hands everything to
    ``MemoryCounters`` (one process by definition: no SQL, no thread hop)."""

    requests_kept: int = 10000
    _memory: MemoryCounters | None = None

    if TYPE_CHECKING:  # provided by SQLiteStore

        def _tx(self, fn: Any, immediate: bool = True) -> Any: ...

        async def _run(self, fn: Any, *args: Any) -> Any: ...

    # -- worker-thread side ----------------------------------------------------------------------

    def _reserve(self, ask: Ask) -> Verdict:
        def run(db: sqlite3.Connection) -> Verdict:
            key, now = ask.key, ask.now
            live = 0
            for lease, expires in db.execute("SELECT lease, expires FROM rl_leases WHERE key = ?", (key,)).fetchall():
                if expires <= now:
                    _release(db, key, lease)
                else:
                    live += 1
            minute = minute_of(now)
            counts = {(k, m): n for k, m, n in db.execute(
                "SELECT kind, minute, n FROM rl_windows WHERE key = ? AND minute >= ?", (key, minute - 1))}
            spent, held = 0, 0
            if ask.period:
                row = db.execute("SELECT spent, held FROM budgets WHERE key = ? AND period = ?", (key, ask.period)).fetchone()
                if row:
                    spent, held = row
            v = decide(ask, live, counts.get(("r", minute - 1), 0), counts.get(("r", minute), 0),
                       counts.get(("t", minute - 1), 0), counts.get(("t", minute), 0), spent, held)
            if not v.ok:
                return v
            db.execute("INSERT OR REPLACE INTO rl_leases VALUES (?, ?, ?, ?, ?, ?, ?)",
                       (key, ask.lease, now + ask.lease_seconds, ask.tokens, ask.cost_nano, ask.period, minute))
            if ("r", minute) not in counts:  # the first request of a minute clears the ones before the last
                db.execute("DELETE FROM rl_windows WHERE key = ? AND minute < ?", (key, minute - 1))
            db.execute(_ADD_WINDOW, (key, "r", minute, 1))
            if ask.tokens:
                db.execute(_ADD_WINDOW, (key, "t", minute, ask.tokens))
            if ask.period:
                db.execute(_ADD_BUDGET, (key, ask.period, 0, ask.cost_nano))
            return v

        return self._tx(run)  # type: ignore[no-any-return]

    def _settle(self, items: list[Settlement]) -> list[int]:
        def run(db: sqlite3.Connection) -> list[int]:
            out = []
            trim = False
            for s in items:
                if s.hold is not None:
                    _release(db, s.key, s.hold.lease)
                    total = s.input + s.output
                    if total:
                        db.execute(_ADD_WINDOW, (s.key, "t", minute_of(s.now), total))
                spent = 0
                if s.period:
                    spent = db.execute(_ADD_BUDGET + " RETURNING spent", (s.key, s.period, s.cost_nano, 0)).fetchone()[0]
                if s.counted:
                    db.execute(_UPSERT_SPEND, (hour_of(s.now), s.key, s.model, s.provider, s.route, *settlement_values(s)))
                seq = db.execute("INSERT INTO request_log (key, body) VALUES (?, ?)", (s.key, orjson.dumps(s.record))).lastrowid or 0
                trim = trim or seq % 100 == 0
                out.append(spent)
            if trim:  # now and then, not on every write
                db.execute("DELETE FROM request_log WHERE seq <= (SELECT MAX(seq) FROM request_log) - ?", (self.requests_kept,))
            return out

        return self._tx(run)  # type: ignore[no-any-return]

    # -- event-loop side -----------------------------------------------------------------------------

    async def reserve(self, ask: Ask) -> Verdict:
        if self._memory is not None:
            return self._memory.reserve(ask)
        return await self._run(self._reserve, ask)  # type: ignore[no-any-return]

    async def settle(self, items: list[Settlement]) -> list[int]:
        if self._memory is not None:
            return self._memory.settle(items)
        return await self._run(self._settle, items)  # type: ignore[no-any-return]

    async def budget_state(self, key: str, period: str) -> tuple[int, int]:
        if self._memory is not None:
            return self._memory.budget_state(key, period)

        def run(db: sqlite3.Connection) -> tuple[int, int]:
            row = db.execute("SELECT spent, held FROM budgets WHERE key = ? AND period = ?", (key, period)).fetchone()
            return (row[0], row[1]) if row else (0, 0)

        return await self._run(self._tx, run, False)  # type: ignore[no-any-return]

    async def spend_buckets(self, start_hour: int, end_hour: int, key: str | None) -> list[tuple[Any, ...]]:
        if self._memory is not None:
            return self._memory.spend_buckets(start_hour, end_hour, key)

        def run(db: sqlite3.Connection) -> list[tuple[Any, ...]]:
            sql = "SELECT * FROM spend WHERE hour >= ? AND hour < ?"
            args: tuple[Any, ...] = (start_hour, end_hour)
            if key is not None:
                sql, args = sql + " AND key = ?", args + (key,)
            return [tuple(r) for r in db.execute(sql, args).fetchall()]

        return await self._run(self._tx, run, False)  # type: ignore[no-any-return]

    async def recent_requests(self, key: str | None, limit: int) -> list[dict[str, Any]]:
        if self._memory is not None:
            return self._memory.recent_requests(key, limit)

        def run(db: sqlite3.Connection) -> list[dict[str, Any]]:
            if key is None:
                rows = db.execute("SELECT body FROM request_log ORDER BY seq DESC LIMIT ?", (limit,)).fetchall()
            else:
                rows = db.execute("SELECT body FROM request_log WHERE key = ? ORDER BY seq DESC LIMIT ?", (key, limit)).fetchall()
            return [orjson.loads(r[0]) for r in rows]

        return await self._run(self._tx, run, False)  # type: ignore[no-any-return]

    async def key_records(self) -> dict[str, dict[str, Any]]:
        if self._memory is not None:
            return dict(self._memory.keys)

        def run(db: sqlite3.Connection) -> dict[str, dict[str, Any]]:
            return {name: orjson.loads(body) for name, body in db.execute("SELECT name, body FROM key_records")}

        return await self._run(self._tx, run, False)  # type: ignore[no-any-return]

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

        return await self._run(self._tx, run, False)  # type: ignore[no-any-return]
