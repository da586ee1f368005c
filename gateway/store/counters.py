"""What the store keeps for limits and spend, and the one decision every backend makes the same way.

A request under a limited key asks (``Ask``) to *hold* one request slot, its estimated tokens and
its estimated cost; the store answers with a ``Verdict`` after checking, in one atomic step
(a Lua script on Redis, one ``BEGIN IMMEDIATE`` transaction on SQLite), all of:

* ``max_parallel``: the key's live holds (each a lease that expires, so a replica that died does
  not keep slots forever);
* ``rpm`` / ``tpm``: a sliding window counter over minute buckets — the previous minute weighted by
  how much of it still overlaps the last 60 s, plus the current minute (the approximation the
  ``limits`` package calls "sliding window counter"; see docs/keys.md for why
  that package is not used directly);
* the budget: spent + held + this estimate must fit ``budget_usd`` of the calendar period.

Either everything is held or nothing is. After the upstream call a ``Settlement`` releases the hold
and adds the real tokens and cost (and, for every request, its spend buckets and request record).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from gateway.random_ids import random_hex

WINDOW = 60.0  # seconds: rpm and tpm are per minute

REASONS = ("parallel", "rpm", "tpm", "budget")


@dataclass(slots=True)
class Ask:
    key: str
    lease: str  # the request id
    now: float  # epoch seconds
    lease_seconds: float
    tokens: int  # estimated input + reserved output
    cost_nano: int
    period: str  # budget period id ("month:2026-12", "total"); "" without a budget
    period_end: float | None  # epoch seconds the period ends (None: total)
    rpm: int | None = None
    tpm: int | None = None
    max_parallel: int | None = None
    budget_nano: int | None = None


@dataclass(slots=True)
class Hold:
    """What an admitted request holds until it is settled."""

    key: str
    lease: str
    period: str
    minute: int
    tokens: int
    cost_nano: int


@dataclass(slots=True)
class Verdict:
    ok: bool
    reason: str | None = None  # parallel | rpm | tpm | budget
    retry_after: float | None = None
    requests_remaining: int | None = None
    tokens_remaining: int | None = None
    reset_at: float = 0.0  # epoch seconds the current minute window ends
    spent_nano: int = 0
    held_nano: int = 0
    hold: Hold | None = None
    too_large: bool = False  # tpm: the estimate alone is more than the limit


@dataclass(slots=True)
class Settlement:
    """One finished request: releases its hold (if any) and records its spend."""

    key: str  # "" for requests without a named key
    now: float
    hold: Hold | None
    model: str
    provider: str
    route: str
    input: int
    output: int
    cache_read: int
    cache_write: int
    reasoning: int
    cost_nano: int
    unpriced: bool
    counted: bool  # reached an upstream: counted in the spend buckets
    record: dict[str, Any] = field(default_factory=dict)  # the request record for /admin/requests
    period: str = ""  # the budget period to add the cost to (when the key has a budget)
    logged: bool = True  # kept in the request records (False: a route target's hold, gateway/routing/targets.py)
    # made once: the same settlement sent again (the ledger retries a failed batch) is counted once
    # where the store keeps done markers (Redis: ``done:<id>`` for 60 s)
    id: str = field(default_factory=lambda: random_hex(16))


SPEND_FIELDS = (
    "requests",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "cost_nano",
    "unpriced_requests",
)


def settlement_values(s: Settlement) -> tuple[int, ...]:
    """The numbers a settlement adds to its spend bucket, in ``SPEND_FIELDS`` order."""
    return (1, s.input, s.output, s.cache_read, s.cache_write, s.reasoning, s.cost_nano, 1 if s.unpriced else 0)


def minute_of(now: float) -> int:
    return int(now // WINDOW)


def hour_of(now: float) -> int:
    return int(now // 3600)


def _window(limit: int, prev: int, cur: int, elapsed: float, need: int) -> tuple[bool, float, int]:
    """(fits, seconds until it would fit, remaining) for one sliding-window limit."""
    weight = (WINDOW - elapsed) / WINDOW
    used = prev * weight + cur
    remaining = max(0, math.floor(limit - used))
    if used + need <= limit:
        return True, 0.0, remaining
    if need > limit:
        return False, WINDOW, remaining  # never fits; the caller is told so
    if cur + need > limit:  # the current minute alone is full: it must end, then decay as "previous"
        later = WINDOW * (1 - (limit - need) / cur) if cur else 0.0
        return False, WINDOW - elapsed + max(later, 0.0), remaining
    # the previous minute's share has to decay: prev * (W - e') / W + cur + need <= limit
    e2 = WINDOW * (1 - (limit - cur - need) / prev) if prev else elapsed
    return False, max(e2 - elapsed, 0.001), remaining


def decide(
    ask: Ask, live: int, rpm_prev: int, rpm_cur: int, tpm_prev: int, tpm_cur: int, spent: int, held: int
) -> Verdict:
    """The one admission rule; the Redis script implements the same arithmetic in Lua."""
    minute = minute_of(ask.now)
    elapsed = ask.now - minute * WINDOW
    v = Verdict(ok=True, reset_at=(minute + 1) * WINDOW, spent_nano=spent, held_nano=held)
    refusals: list[tuple[str, float | None]] = []
    if ask.max_parallel is not None and live >= ask.max_parallel:
        refusals.append(("parallel", 1.0))
    if ask.rpm is not None:
        fits, wait, v.requests_remaining = _window(ask.rpm, rpm_prev, rpm_cur, elapsed, 1)
        if not fits:
            refusals.append(("rpm", wait))
    if ask.tpm is not None:
        fits, wait, v.tokens_remaining = _window(ask.tpm, tpm_prev, tpm_cur, elapsed, ask.tokens)
        if not fits:
            v.too_large = ask.tokens > ask.tpm
            refusals.append(("tpm", wait))
    if ask.budget_nano is not None and spent + held + ask.cost_nano > ask.budget_nano:
        refusals.append(("budget", None if ask.period_end is None else max(ask.period_end - ask.now, 1.0)))
    if refusals:
        # the budget wins (waiting a minute does not help), then the longest wait
        budget = next((r for r in refusals if r[0] == "budget"), None)
        v.ok = False
        v.reason, v.retry_after = budget or max(refusals, key=lambda r: r[1] or 0.0)
        return v
    if v.requests_remaining is not None:
        v.requests_remaining = max(0, v.requests_remaining - 1)
    if v.tokens_remaining is not None:
        v.tokens_remaining = max(0, v.tokens_remaining - ask.tokens)
    v.held_nano = held + ask.cost_nano
    v.hold = Hold(ask.key, ask.lease, ask.period, minute, ask.tokens, ask.cost_nano)
    return v
