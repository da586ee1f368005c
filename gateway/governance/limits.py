"""Admission of a request under a named key: the route allowed, then rpm, tpm, max_parallel and the
budget, held atomically in the ``[store]`` before anything reaches an upstream.

The reservation (what a request holds until it is settled, gateway/governance/ledger.py):

* tokens: the input estimate (gateway/endpoints/count_tokens.py, ~4 characters a token) plus the output it
  may produce: ``max_tokens``, at most ``[spend] reserve_output_tokens`` (also used when the caller
  sent none) — that cap keeps one request asking for 100k output tokens from looking like 100k
  tokens of spend;
* cost: those tokens at the input and output rates of the most expensive target of the route
  (a fallback may answer).

So concurrent requests can overshoot a budget by at most, per request in flight when it ran out,
its real cost minus its reservation (zero when its output stayed under the cap and the input
estimate was not short). A refusal is a 429 in the caller's dialect with ``Retry-After`` and the
dialect's rate-limit headers; a store that cannot be reached is a 503, never "unlimited".
"""

from __future__ import annotations

import logging
import math
import time
from typing import TYPE_CHECKING, Any

from gateway.dialects.registry import codec_for
from gateway.errors import GatewayError
from gateway.governance.keys import KeySpec
from gateway.governance.periods import period_bounds
from gateway.governance.prices import NANO
from gateway.ir import ChatRequest
from gateway.routing.router import Resolved
from gateway.store.counters import Ask, Verdict
from gateway.token_estimate import estimate_tokens

if TYPE_CHECKING:
    from gateway.governance.prices import PriceBook
    from gateway.settings import SpendSettings
    from gateway.telemetry.observe import AccessRecord, Metrics
    from gateway.upstream.providers import Provider

log = logging.getLogger("gateway.limits")

Headers = list[tuple[bytes, bytes]]
# refusal reason -> (raw error code the dialects' renderers map, message)
_REFUSAL = {
    "rpm": ("requests", "rate limit of {rpm} requests per minute reached for key {name!r}"),
    "parallel": ("requests", "key {name!r} already has {max_parallel} requests in flight (max_parallel)"),
    "tpm": ("tokens", "rate limit of {tpm} tokens per minute reached for key {name!r}"),
    "budget": ("insufficient_quota", "key {name!r} has spent its budget of ${budget_usd:g} for this {budget_period}"),
}


class Limiter:
    def __init__(
        self, spend: SpendSettings, metrics: Metrics, prices: PriceBook, providers: dict[str, Provider]
    ) -> None:
        self.metrics, self.prices, self.providers = metrics, prices, providers
        self.reserve_output = spend.reserve_output_tokens
        self.lease_seconds = spend.lease_seconds
        self.store: Any = None  # set when the store opens (app lifespan)
        self._gauges: dict[str, Any] = {}  # metric children by key: labels() is ~5 µs a call

    async def admit(
        self,
        spec: KeySpec,
        req: ChatRequest,
        resolved: Resolved,
        record: AccessRecord,
        dialect: str,
        headers: Headers,
        *,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
    ) -> None:
        """Raise the caller's refusal, or return with the request's hold on ``record``.
        ``input_tokens`` / ``output_tokens``: the reservation when the caller knows it better than
        ``req`` says (an embeddings request: its inputs' estimate, no output)."""
        metrics = self.metrics
        if not spec.allows(req.model):
            metrics.refusals.labels(spec.name, "model").inc()
            raise GatewayError("permission", f"key {spec.name!r} may not call model {req.model!r}", 403, param="model")
        prices = self.prices
        providers = self.providers
        target_prices = [prices.lookup(providers[t.provider].settings, t.upstream_model) for t in resolved.targets]
        if spec.refuse_unpriced and target_prices[0] is None:
            metrics.refusals.labels(spec.name, "unpriced").inc()
            raise GatewayError(
                "permission",
                f"model {req.model!r} has no known price and key {spec.name!r} refuses unpriced models",
                403,
                param="model",
            )
        if not spec.limited:
            return
        now = time.time()
        out_tokens = (
            min(req.max_tokens or self.reserve_output, self.reserve_output) if output_tokens is None else output_tokens
        )
        if input_tokens is not None:
            in_tokens = input_tokens
        else:
            in_tokens = estimate_tokens(req) if (spec.tpm is not None or spec.budget_usd is not None) else 0
        cost = max((p.estimate_nano(in_tokens, out_tokens) for p in target_prices if p is not None), default=0)
        period, _, period_end = ("", None, None)
        if spec.budget_usd is not None:
            period, _, period_end = period_bounds(spec.budget_period, now)
        ask = Ask(
            spec.name,
            record.request_id,
            now,
            self.lease_seconds,
            in_tokens + out_tokens if spec.tpm is not None else 0,
            cost,
            period,
            period_end,
            spec.rpm,
            spec.tpm,
            spec.max_parallel,
            None if spec.budget_usd is None else round(spec.budget_usd * NANO),
        )
        try:
            if self.store is None:
                raise RuntimeError("store not open")
            verdict = await self.store.reserve(ask)
        except Exception as exc:
            log.error("cannot check the limits of key %r: the store is unreachable (%s)", spec.name, type(exc).__name__)
            metrics.refusals.labels(spec.name, "store_unavailable").inc()
            headers.append((b"retry-after", b"1"))
            raise GatewayError(
                "overloaded",
                "the gateway cannot reach its store to check this key's limits; retry shortly",
                503,
                retry_after=1.0,
            ) from None
        self._headers(dialect, spec, verdict, now, headers)
        if spec.budget_usd is not None:
            gauge = self._gauges.get(spec.name)
            if gauge is None:
                gauge = self._gauges[spec.name] = metrics.budget_remaining.labels(spec.name)
            gauge.set(spec.budget_usd - (verdict.spent_nano / NANO))
        if not verdict.ok:
            assert verdict.reason is not None
            metrics.refusals.labels(spec.name, verdict.reason).inc()
            raise self._refusal(spec, verdict, ask, headers)
        record.hold = verdict.hold

    async def admit_call(self, spec: KeySpec, record: AccessRecord, cost_nano: int = 0) -> None:
        """An MCP ``tools/call`` under ``spec`` (gateway/mcp/): its rpm, max_parallel and budget
        (``cost_nano``: the server's ``price_per_call``), held like a model call and settled by the
        ledger; tokens are not counted. Raises the refusal (a 429, or 503 without the store)."""
        if not spec.limited:
            return
        now = time.time()
        period, period_end = "", None
        if spec.budget_usd is not None:
            period, _, period_end = period_bounds(spec.budget_period, now)
        budget = None if spec.budget_usd is None else round(spec.budget_usd * NANO)
        ask = Ask(
            spec.name,
            record.request_id,
            now,
            self.lease_seconds,
            0,
            cost_nano,
            period,
            period_end,
            spec.rpm,
            None,
            spec.max_parallel,
            budget,
        )
        try:
            if self.store is None:
                raise RuntimeError("store not open")
            verdict = await self.store.reserve(ask)
        except Exception as exc:
            log.error("cannot check the limits of key %r: the store is unreachable (%s)", spec.name, type(exc).__name__)
            self.metrics.refusals.labels(spec.name, "store_unavailable").inc()
            raise GatewayError(
                "overloaded", "the gateway cannot reach its store to check this key's limits; retry shortly", 503
            ) from None
        if not verdict.ok:
            self.metrics.refusals.labels(spec.name, verdict.reason or "rpm").inc()
            raise self._refusal(spec, verdict, ask, [])
        record.hold = verdict.hold

    @staticmethod
    def _headers(dialect: str, spec: KeySpec, v: Verdict, now: float, headers: Headers) -> None:
        render = codec_for(dialect).rate_limit_headers  # the headers the caller's SDK reads (Gemini's: none)
        if render is not None and (spec.rpm is not None or spec.tpm is not None):
            headers += render(spec.rpm, v.requests_remaining, spec.tpm, v.tokens_remaining, max(0.0, v.reset_at - now))

    @staticmethod
    def _refusal(spec: KeySpec, v: Verdict, ask: Ask, headers: Headers) -> GatewayError:
        raw, template = _REFUSAL[v.reason or "rpm"]
        message = template.format(**spec.public())
        if v.reason == "tpm" and v.too_large:
            message = f"this request needs about {ask.tokens} tokens, more than key {spec.name!r} may use per minute ({spec.tpm})"
        if v.reason == "budget":
            headers.append((b"x-should-retry", b"false"))  # the SDKs would retry a 429; waiting does not help
            if v.retry_after is not None:
                message += "; it renews at the start of the next period"
        if v.retry_after is not None:
            headers.append((b"retry-after", str(max(1, math.ceil(v.retry_after))).encode()))
        return GatewayError("rate_limit", message, 429, raw=raw, origin="gateway", retry_after=v.retry_after)
