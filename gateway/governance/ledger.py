"""Spend: each request's cost, computed once from its finished ``AccessRecord`` and settled once.

``Observer.finish`` (gateway/telemetry/observe.py) is the single point every request passes through with its
final usage, so that is where ``finish`` here runs: it prices the usage of the upstream model that
actually answered (a fallback at the fallback's price), writes ``cost_usd`` onto the record for the
access log, and queues a ``Settlement`` that releases the request's hold and adds its real cost
and tokens to the store. Nothing here runs per chunk.

Settlements are written in batches by one background task (one transaction on SQLite, one
pipelined round trip on Redis) every ``SETTLE_BATCH_SECONDS``, off the request's path: under load
the cost of a commit is shared by every request that ended meanwhile. ``flush`` waits for this process's queue,
so an admin read right after a request sees it.

A request that reached an upstream and came back without a price, or without any usage at all, is
*unpriced*: counted in ``unpriced_requests``, logged as a warning, never filed as $0. A request
that failed before any upstream answered costs nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from gateway.governance.periods import period_bounds
from gateway.governance.prices import NANO, PriceBook
from gateway.store.base import Store
from gateway.store.counters import Settlement

if TYPE_CHECKING:
    from gateway.governance.keys import KeyRing
    from gateway.telemetry.observe import AccessRecord, Metrics
    from gateway.upstream.providers import Provider

log = logging.getLogger("gateway.ledger")

SETTLE_BATCH_SECONDS = 0.01  # one transaction / round trip for every request that ended in this time
# a batch the store refused is sent again after these pauses (a Redis failover, a busy SQLite file):
# dropped, its spend would be lost and its holds would keep the budget until they expire. Each
# settlement keeps its id, so one that had been applied counts once (Redis keeps done markers 60 s:
# the pauses and the store's own retries stay well inside that)
SETTLE_RETRY_PAUSES = (0.25, 0.5, 1.0, 2.0, 4.0)


class Ledger:
    def __init__(self, prices: PriceBook, providers: dict[str, Provider], ring: KeyRing, metrics: Metrics) -> None:
        self.prices = prices
        self.providers = providers
        self.ring = ring
        self.metrics = metrics
        self.store: Any = None  # set when the store opens (app lifespan)
        self.call_prices: dict[str, float] = {}  # MCP server -> USD per tools/call ([[mcp_servers]] price_per_call)
        self._pending: list[Settlement] = []
        self._drainer: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self._costs: dict[tuple[str, str, str], Any] = {}
        self._unpriced: dict[
            tuple[str, str], list[Any]
        ] = {}  # (provider, model) -> [last warned, count since]  # metric children: labels() is ~5 µs a call

    def finish(self, record: AccessRecord, line: dict[str, Any]) -> None:
        """Price ``record`` (sets ``cost_usd``/``unpriced`` on it and on its log ``line``) and queue
        its settlement. Called once per request by ``Observer.finish``; must not raise."""
        try:
            self._finish(record, line)
        except Exception:
            log.exception("could not settle request %s", record.request_id)

    def _finish(self, record: AccessRecord, line: dict[str, Any]) -> None:
        now = time.time()
        cost = 0
        unpriced = False
        model = record.upstream_model or record.model or ""
        provider = record.provider or ""
        reached = bool(provider) and bool(record.attempts) and any(a.get("status") == 200 for a in record.attempts)
        has_usage = record.input_tokens is not None or record.output_tokens is not None
        if has_usage:
            p = self.providers.get(provider)
            price = self.prices.lookup(p.settings if p is not None else None, model)
            if price is None:
                unpriced = True
                self._warn(record, "no [prices] entry and no price database entry for", provider, model)
            elif not price.has_output and record.output_tokens:
                unpriced = True  # an input-only entry (meant for an embedding model) cannot price output
                self._warn(record, f"output tokens but only an input price ({price.source}) for", provider, model)
            else:
                cost = price.cost_nano(
                    record.input_tokens,
                    record.output_tokens,
                    record.cache_read_tokens,
                    record.cache_write_tokens,
                    record.reasoning_tokens,
                )
        elif reached and record.status < 400 and record.error_kind is None:
            unpriced = True  # the observer's usage_missing warning has said so
        if record.kind == "mcp":  # a tool call: the server's price_per_call once it reached the server
            model, provider = record.tool or "", f"mcp:{record.server or ''}"
            reached = record.status < 500 and record.status not in (403, 404, 429)
            cost = round(self.call_prices.get(record.server or "", 0.0) * NANO) if reached else 0
        hit = record.cache == "hit"
        if hit:  # answered from the response cache: nothing spent; what it cost when first paid for, saved
            record.cost_saved_usd = line["cost_saved_usd"] = None if unpriced else cost / NANO
            if cost:
                self.metrics.cache_saved.inc(cost / NANO)
            cost, unpriced = 0, False
        record.cost_usd = None if unpriced else cost / NANO
        record.unpriced = unpriced
        line["cost_usd"], line["unpriced"] = record.cost_usd, unpriced
        key = record.key or ""
        if cost:
            counter = self._costs.get((key, provider, model))
            if counter is None:
                counter = self._costs[(key, provider, model)] = self.metrics.cost.labels(key, provider, model)
            counter.inc(cost / NANO)
        hold = record.hold
        period = hold.period if hold is not None else ""
        spec = self.ring.by_name.get(key) if key else None
        if not period and spec is not None and spec.budget_usd is not None:
            period = period_bounds(spec.budget_period, now)[0]
        settlement = Settlement(
            key,
            now,
            hold,
            model,
            provider,
            record.route or "",
            0 if hit else record.input_tokens or 0,  # a hit holds no tokens against tpm
            0 if hit else record.output_tokens or 0,
            0 if hit else record.cache_read_tokens or 0,
            0 if hit else record.cache_write_tokens or 0,
            0 if hit else record.reasoning_tokens or 0,
            cost,
            unpriced,
            counted=reached or has_usage,
            record=line,
            period=period,
        )
        self._pending.append(settlement)
        if self.store is not None and (self._drainer is None or self._drainer.done()):
            self._idle.clear()
            self._drainer = asyncio.get_running_loop().create_task(self._drain())

    def _warn(self, record: AccessRecord, why: str, provider: str, model: str) -> None:
        """A warning per (provider, model) and minute, with how many went unpriced meanwhile."""
        now = time.monotonic()
        seen = self._unpriced.setdefault((provider, model), [0.0, 0])
        seen[1] += 1
        if now - seen[0] >= 60.0:
            log.warning(
                "UNPRICED: %s model %r (provider %r): %d request(s) in the last minute, the latest %s, are in "
                "unpriced_requests and in no budget",
                why,
                model,
                provider,
                seen[1],
                record.request_id,
            )
            seen[0], seen[1] = now, 0

    async def _drain(self) -> None:
        try:
            if getattr(self.store, "_memory", None) is None:
                await asyncio.sleep(SETTLE_BATCH_SECONDS)  # gather the settlements of requests ending together
            while self._pending and self.store is not None:
                batch, self._pending = self._pending, []
                try:
                    spent = await self._settle(batch)
                except Exception as exc:
                    log.error(
                        "could not record the spend of %d requests (%s: %s); their holds expire by themselves",
                        len(batch),
                        type(exc).__name__,
                        exc,
                    )
                    continue
                for s, total in zip(batch, spent):
                    spec = self.ring.by_name.get(s.key) if s.key else None
                    if spec is not None and spec.budget_usd is not None and s.period:
                        self.metrics.budget_remaining.labels(s.key).set(spec.budget_usd - total / NANO)
        finally:
            self._idle.set()

    async def _settle(self, batch: list[Settlement]) -> list[int]:
        store: Store = self.store
        for pause in SETTLE_RETRY_PAUSES:
            try:
                return await store.settle(batch)
            except Exception as exc:
                log.warning(
                    "could not record the spend of %d requests (%s: %s); again in %.2f s",
                    len(batch),
                    type(exc).__name__,
                    exc,
                    pause,
                )
                await asyncio.sleep(pause)
        return await store.settle(batch)

    async def flush(self) -> None:
        """Wait until this process's queued settlements are in the store."""
        if self._pending and self.store is not None and (self._drainer is None or self._drainer.done()):
            self._idle.clear()
            self._drainer = asyncio.get_running_loop().create_task(self._drain())
        await self._idle.wait()
