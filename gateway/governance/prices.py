"""What a request cost: the price of the upstream model that answered, times its canonical usage.

Where a price comes from, first match wins:

1. ``[prices."<glob>"]`` in the config (USD per million tokens; globs match the upstream model);
2. the `genai-prices` database (pydantic's, on PyPI: a maintained table of providers' published
   prices, bundled with the package so it works offline; tiered prices such as Anthropic's and
   Gemini's long-context rates and dated price changes are in it). It is looked up once per
   (provider, model) and turned into flat rates here: its own ``calc_price`` costs ~250 µs a call,
   which is more than this whole feature may add to a request;
3. nothing: the request is *unpriced*. It is never counted as $0: the ledger counts it in
   ``unpriced_requests`` and logs a warning, and a key may refuse unpriced models outright.

The canonical usage (gateway/events.py) counts cache reads and writes inside ``input`` and
reasoning inside ``output``; each part is priced at its own rate exactly once::

    (input - cache_read - cache_write) × input + cache_read × cache_read + cache_write × cache_write
    + (output - reasoning) × output + reasoning × reasoning

Money is kept in integer nano-dollars (1e-9 USD) so spend adds up exactly across replicas.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from gateway.settings import PriceSettings, ProviderSettings
from gateway.upstream.providers import identity_of

log = logging.getLogger("gateway.prices")

NANO = 1_000_000_000  # nano-dollars per dollar
_PER_TOKEN = NANO / 1_000_000  # nano-dollars per token for a price of $1 per million tokens

_CACHE_SECONDS = 60.0  # dated / time-of-day prices in the database are looked up again after this


Rate = tuple[float, tuple[tuple[int, float], ...]]  # (base $/Mtok, ((input tokens above, $/Mtok), ...))


def _rate_at(rate: Rate, total_input: int) -> float:
    base, tiers = rate
    for start, price in reversed(tiers):  # a "cliff": past a tier's start, every token pays its rate
        if total_input > start:
            return price
    return base


@dataclass(frozen=True, slots=True)
class Price:
    """Rates of one model, USD per million tokens per token kind (tiers by total input tokens)."""

    input: Rate
    output: Rate
    cache_read: Rate
    cache_write: Rate
    reasoning: Rate
    source: str  # "config:<glob>" or "genai-prices:<provider>/<model>": shown by the admin API
    has_output: bool = True  # False: an input-only entry (an embedding model); output tokens have no price

    def cost_nano(
        self,
        input: int | None,
        output: int | None,
        cache_read: int | None,
        cache_write: int | None,
        reasoning: int | None,
    ) -> int:
        total_in = input or 0
        cr, cw, rs = cache_read or 0, cache_write or 0, reasoning or 0
        out = output or 0
        if not self.input[1] and not self.output[1] and not self.cache_read[1] and not self.cache_write[1]:
            r_in, r_out, r_cr, r_cw, r_rs = (
                self.input[0],
                self.output[0],
                self.cache_read[0],
                self.cache_write[0],
                self.reasoning[0],
            )
        else:
            r_in, r_out = _rate_at(self.input, total_in), _rate_at(self.output, total_in)
            r_cr, r_cw, r_rs = (
                _rate_at(self.cache_read, total_in),
                _rate_at(self.cache_write, total_in),
                _rate_at(self.reasoning, total_in),
            )
        usd_per_m = max(total_in - cr - cw, 0) * r_in + cr * r_cr + cw * r_cw + max(out - rs, 0) * r_out + rs * r_rs
        return round(usd_per_m * _PER_TOKEN)

    def estimate_nano(self, input_tokens: int, output_tokens: int) -> int:
        """An upper estimate for a reservation: uncached input, output at the output rate."""
        return round(
            (input_tokens * _rate_at(self.input, input_tokens) + output_tokens * _rate_at(self.output, input_tokens))
            * _PER_TOKEN
        )


def _flat(value: float) -> Rate:
    return (float(value), ())


def price_from_settings(glob: str, p: PriceSettings) -> Price:
    output = _flat(p.output if p.output is not None else 0.0)
    return Price(
        _flat(p.input),
        output,
        _flat(p.cache_read if p.cache_read is not None else p.input),
        _flat(p.cache_write if p.cache_write is not None else p.input),
        _flat(p.reasoning) if p.reasoning is not None else output,
        f"config:{glob}",
        has_output=p.output is not None,
    )


def _rate_from_db(value: Any, fallback: Rate | None) -> Rate | None:
    if value is None:
        return fallback
    tiers = getattr(value, "tiers", None)
    if tiers is not None:
        return (float(value.base), tuple((int(t.start), float(t.price)) for t in tiers))
    return (float(value), ())


class PriceBook:
    """Price lookup by (provider, upstream model), cached: ~1 µs per request after the first."""

    def __init__(self, prices: dict[str, PriceSettings], use_database: bool = True) -> None:
        self._exact = {k: price_from_settings(k, v) for k, v in prices.items() if not any(c in k for c in "*?[")}
        self._globs = [(k, price_from_settings(k, v)) for k, v in prices.items() if any(c in k for c in "*?[")]
        self._use_db = use_database
        self._cache: dict[tuple[str, str], tuple[Price | None, float]] = {}

    def warm(self) -> None:
        """Import the database now (~0.4 s), not on the first request that needs a price."""
        if self._use_db:
            try:
                from genai_prices import data_snapshot

                data_snapshot.get_snapshot()
            except ImportError:
                log.warning("genai-prices is not installed: models without a [prices] entry are unpriced")
                self._use_db = False

    def lookup(self, provider: ProviderSettings | None, model: str) -> Price | None:
        key = (provider.name if provider is not None else "", model)
        hit = self._cache.get(key)
        now = time.monotonic()
        if hit is not None and hit[1] > now:
            return hit[0]
        price = self._configured(model)
        ttl = float("inf")
        if price is None and self._use_db:
            price = self._database(provider, model)
            ttl = _CACHE_SECONDS
        if len(self._cache) < 10000:
            self._cache[key] = (price, now + ttl)
        return price

    def _configured(self, model: str) -> Price | None:
        price = self._exact.get(model)
        if price is None:
            price = next((p for glob, p in self._globs if fnmatchcase(model, glob)), None)
        return price

    def _database(self, provider: ProviderSettings | None, model: str) -> Price | None:
        try:
            from datetime import UTC, datetime

            from genai_prices import data_snapshot
        except ImportError:
            return None
        snapshot = data_snapshot.get_snapshot()
        found = None
        attempts: list[tuple[str | None, str | None]] = []
        if provider is not None and provider.base_url:
            attempts.append((None, provider.base_url))
        price_provider = identity_of(provider).price_provider if provider is not None else None
        if price_provider is not None:  # the codec's genai-prices id, for a base_url the database does not know
            attempts.append((price_provider, None))
        attempts.append((None, None))
        for provider_id, api_url in attempts:
            try:
                found = snapshot.find_provider_model(model, None, provider_id, api_url)
                break
            except LookupError:
                continue
        if found is None:
            return None
        db_provider, info = found
        mp = info.get_prices(datetime.now(tz=UTC))
        inp = _rate_from_db(getattr(mp, "input_mtok", None), None)
        out = _rate_from_db(getattr(mp, "output_mtok", None), None)
        if inp is None or out is None:
            return None
        return Price(
            inp,
            out,
            _rate_from_db(getattr(mp, "cache_read_mtok", None), inp) or inp,
            _rate_from_db(getattr(mp, "cache_write_mtok", None), inp) or inp,
            out,
            f"genai-prices:{db_provider.id}/{info.id}",
        )
