"""Limits and spend in this process only: the backend of ``sqlite://:memory:`` (one process, nothing
kept across a restart — tests, demos, a single worker that needs no ledger on disk).

Plain dicts on the event loop: every method runs to completion without an ``await`` in between,
so each reserve is atomic by construction and costs no thread hop and no SQL.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from gateway.store import key_state
from gateway.store.counters import SPEND_FIELDS, Ask, Settlement, Verdict, hour_of, settlement_values


class MemoryCounters:
    def __init__(self, requests_kept: int = 10000) -> None:
        self.states: dict[str, key_state.State] = {}
        self.spent: dict[tuple[str, str], int] = {}
        self.spend: dict[tuple[Any, ...], list[int]] = {}
        self.log: deque[tuple[str, dict[str, Any]]] = deque(maxlen=requests_kept)
        self.keys: dict[str, dict[str, Any]] = {}
        self.version = 0

    def _state(self, key: str) -> key_state.State:
        st = self.states.get(key)
        if st is None:
            st = self.states[key] = key_state.new_state()
        return st

    def reserve(self, ask: Ask) -> Verdict:
        return key_state.reserve(
            self._state(ask.key), ask, self.spent.get((ask.key, ask.period), 0) if ask.period else 0
        )

    def settle(self, items: list[Settlement]) -> list[int]:
        out = []
        for s in items:
            if s.hold is not None:
                key_state.settle(self._state(s.key), s)
            spent = 0
            if s.period:
                spent = self.spent[(s.key, s.period)] = self.spent.get((s.key, s.period), 0) + s.cost_nano
            if s.counted:
                acc = self.spend.setdefault(
                    (hour_of(s.now), s.key, s.model, s.provider, s.route), [0] * len(SPEND_FIELDS)
                )
                for i, value in enumerate(settlement_values(s)):
                    acc[i] += value
            if s.logged:
                self.log.append((s.key, s.record))
            out.append(spent)
        return out

    def budget_state(self, key: str, period: str) -> tuple[int, int]:
        return self.spent.get((key, period), 0), self._state(key)["h"].get(period, 0)

    def spend_buckets(self, start_hour: int, end_hour: int, key: str | None) -> list[tuple[Any, ...]]:
        return [
            (*dims, *values)
            for dims, values in self.spend.items()
            if start_hour <= dims[0] < end_hour and (key is None or dims[1] == key)
        ]

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
