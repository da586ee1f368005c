"""Limits and spend in this process only: the backend of ``sqlite://:memory:`` (one process, nothing
kept across a restart — tests, demos, a single worker that needs no ledger on disk).

Plain dicts on the event loop: every method runs to completion without an ``await`` in between,
so each reserve is atomic by construction and costs no thread hop and no SQL.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from gateway.store.counters import SPEND_FIELDS, Ask, Settlement, Verdict, decide, hour_of, minute_of, settlement_values


class MemoryCounters:
    def __init__(self, requests_kept: int = 10000) -> None:
        self.leases: dict[str, dict[str, tuple[float, int, int, str, int]]] = {}
        self.windows: dict[tuple[str, str, int], int] = {}
        self.budgets: dict[tuple[str, str], list[int]] = {}
        self.spend: dict[tuple[Any, ...], list[int]] = {}
        self.log: deque[tuple[str, dict[str, Any]]] = deque(maxlen=requests_kept)
        self.keys: dict[str, dict[str, Any]] = {}
        self.version = 0

    def _release(self, key: str, lease: str) -> None:
        held = self.leases.get(key, {}).pop(lease, None)
        if held is None:
            return
        _, tokens, cost, period, minute = held
        if cost and period:
            b = self.budgets.setdefault((key, period), [0, 0])
            b[1] = max(b[1] - cost, 0)
        window = (key, "t", minute)
        if tokens and window in self.windows:
            self.windows[window] = max(self.windows[window] - tokens, 0)

    def reserve(self, ask: Ask) -> Verdict:
        key, now = ask.key, ask.now
        mine = self.leases.setdefault(key, {})
        for lease in [lease for lease, held in mine.items() if held[0] <= now]:
            self._release(key, lease)
        minute = minute_of(now)
        w = self.windows
        spent, held = self.budgets.get((key, ask.period), (0, 0)) if ask.period else (0, 0)
        v = decide(ask, len(mine), w.get((key, "r", minute - 1), 0), w.get((key, "r", minute), 0),
                   w.get((key, "t", minute - 1), 0), w.get((key, "t", minute), 0), spent, held)
        if not v.ok:
            return v
        mine[ask.lease] = (now + ask.lease_seconds, ask.tokens, ask.cost_nano, ask.period, minute)
        if (key, "r", minute) not in w:
            for old in [k for k in w if k[0] == key and k[2] < minute - 1]:
                del w[old]
        w[(key, "r", minute)] = w.get((key, "r", minute), 0) + 1
        if ask.tokens:
            w[(key, "t", minute)] = w.get((key, "t", minute), 0) + ask.tokens
        if ask.period:
            self.budgets.setdefault((key, ask.period), [0, 0])[1] += ask.cost_nano
        return v

    def settle(self, items: list[Settlement]) -> list[int]:
        out = []
        for s in items:
            if s.hold is not None:
                self._release(s.key, s.hold.lease)
                if s.input + s.output:
                    window = (s.key, "t", minute_of(s.now))
                    self.windows[window] = self.windows.get(window, 0) + s.input + s.output
            spent = 0
            if s.period:
                b = self.budgets.setdefault((s.key, s.period), [0, 0])
                b[0] += s.cost_nano
                spent = b[0]
            if s.counted:
                acc = self.spend.setdefault((hour_of(s.now), s.key, s.model, s.provider, s.route), [0] * len(SPEND_FIELDS))
                for i, value in enumerate(settlement_values(s)):
                    acc[i] += value
            self.log.append((s.key, s.record))
            out.append(spent)
        return out

    def budget_state(self, key: str, period: str) -> tuple[int, int]:
        b = self.budgets.get((key, period), (0, 0))
        return b[0], b[1]

    def spend_buckets(self, start_hour: int, end_hour: int, key: str | None) -> list[tuple[Any, ...]]:
        return [(*dims, *values) for dims, values in self.spend.items() if start_hour <= dims[0] < end_hour and (key is None or dims[1] == key)]

    def recent_requests(self, key: str | None, limit: int) -> list[dict[str, Any]]:
        out = []
        for k, record in reversed(self.log):
            if key is None or k == key:
                out.append(record)
                if len(out) >= limit:
                    break
        return out

    def put_key_record(self, name: str, record: dict[str, Any]) -> None:
        self.keys[name] = record
        self.version += 1
