"""One named key's live limit state as one small JSON-able dict: its leases, its minute windows and
what it holds against each budget period.

Why one dict per key: on SQLite every page a transaction writes costs a write to the WAL, and a
reserve that touched four tables cost four; as one row it costs one (measured in
bench/README.md "Named keys"). The in-process backend keeps the same dicts in memory, so both run
this code. Redis has its own script (gateway/store/redis_counters.py) with the same rules.

Shape: ``{"l": {lease: [expires, tokens, cost, period, minute]}, "r": {minute: n}, "t": {minute: n},
"h": {period: held}}`` (minutes as strings: JSON keys).
"""

from __future__ import annotations

from typing import Any

from gateway.store.counters import Ask, Settlement, Verdict, decide, minute_of

State = dict[str, Any]


def new_state() -> State:
    return {"l": {}, "r": {}, "t": {}, "h": {}}


def release(st: State, lease: str) -> None:
    held = st["l"].pop(lease, None)
    if held is None:
        return
    _, tokens, cost, period, minute = held
    if cost and period:
        st["h"][period] = max(st["h"].get(period, 0) - cost, 0)
        if not st["h"][period]:
            del st["h"][period]
    m = str(minute)
    if tokens and m in st["t"]:
        st["t"][m] = max(st["t"][m] - tokens, 0)


def _prune(st: State, minute: int) -> None:
    for kind in ("r", "t"):
        window = st[kind]
        if len(window) > 2:
            for m in [m for m in window if int(m) < minute - 1]:
                del window[m]


def reserve(st: State, ask: Ask, spent: int) -> Verdict:
    """Check and hold ``ask`` on ``st`` (changed only when admitted, except expired leases)."""
    now = ask.now
    for lease in [lease for lease, held in st["l"].items() if held[0] <= now]:
        release(st, lease)
    minute = minute_of(now)
    cur, prev = str(minute), str(minute - 1)
    r, t = st["r"], st["t"]
    held = st["h"].get(ask.period, 0) if ask.period else 0
    v = decide(ask, len(st["l"]), r.get(prev, 0), r.get(cur, 0), t.get(prev, 0), t.get(cur, 0), spent, held)
    if not v.ok:
        return v
    st["l"][ask.lease] = [now + ask.lease_seconds, ask.tokens, ask.cost_nano, ask.period, minute]
    r[cur] = r.get(cur, 0) + 1
    if ask.tokens:
        t[cur] = t.get(cur, 0) + ask.tokens
    if ask.period and ask.cost_nano:
        st["h"][ask.period] = held + ask.cost_nano
    _prune(st, minute)
    return v


def settle(st: State, s: Settlement) -> None:
    """Release the hold of ``s`` and count the tokens the upstream reported."""
    assert s.hold is not None
    release(st, s.hold.lease)
    total = s.input + s.output
    if total:
        m = str(minute_of(s.now))
        st["t"][m] = st["t"].get(m, 0) + total
        _prune(st, minute_of(s.now))
