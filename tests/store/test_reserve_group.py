"""Group commit of a SQLite store's reserves (gateway/store/sqlite_counters.py): the reserves asked in
one event-loop turn are decided in one transaction, exactly as one after another would be; another
process holding the write lock sends the group to the worker thread (which waits for it); a request
cancelled before its turn holds nothing."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from gateway.store import open_store
from gateway.store.sqlite_counters import SQLiteCounters
from tests.store.test_counters import ask


async def test_one_turn_of_reserves_is_one_transaction_and_decides_in_order(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'g.db'}", 3600.0)
    assert isinstance(store, SQLiteCounters)
    commits = 0
    real = SQLiteCounters._reserve_many

    def counted(self: SQLiteCounters, asks: list, db: sqlite3.Connection | None = None) -> list:  # type: ignore[type-arg]
        nonlocal commits
        commits += 1
        return real(self, asks, db)

    SQLiteCounters._reserve_many = counted  # type: ignore[method-assign]
    try:
        verdicts = await asyncio.gather(*(store.reserve(ask(f"r{i}", max_parallel=3, rpm=10)) for i in range(6)))
    finally:
        SQLiteCounters._reserve_many = real  # type: ignore[method-assign]
    assert commits == 1
    assert [v.ok for v in verdicts] == [True, True, True, False, False, False]
    assert verdicts[3].reason == "parallel"
    # the state written once holds the three leases: a second store (another process) sees them
    other = open_store(f"sqlite:///{tmp_path / 'g.db'}", 3600.0)
    assert not (await other.reserve(ask("r9", max_parallel=3))).ok
    await store.close()
    await other.close()


async def test_a_write_lock_held_by_another_process_sends_the_group_to_the_worker(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    store = open_store(f"sqlite:///{path}", 3600.0)
    assert (await store.reserve(ask("r0", max_parallel=2))).ok  # schema made, inline connection open
    locker = sqlite3.connect(path, isolation_level=None)
    locker.execute("BEGIN IMMEDIATE")
    pending = asyncio.gather(*(store.reserve(ask(f"r{i}", max_parallel=2)) for i in range(1, 3)))
    await asyncio.sleep(0.1)
    assert not pending.done()  # waiting on the worker thread, the loop free
    locker.execute("COMMIT")
    verdicts = await asyncio.wait_for(pending, 10)
    assert [v.ok for v in verdicts] == [True, False]
    locker.close()
    await store.close()


async def test_a_reserve_cancelled_before_its_turn_holds_no_lease(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'c.db'}", 3600.0)
    gone = asyncio.ensure_future(store.reserve(ask("gone", max_parallel=1)))
    await asyncio.sleep(0)  # it has asked; its group runs on the next turn
    gone.cancel()
    kept = await store.reserve(ask("kept", max_parallel=1))
    assert kept.ok  # the cancelled one took no lease
    assert gone.cancelled()
    await store.close()
