"""What the console shows live, kept in this process: recent request records and per-minute figures.

``Recent.note`` runs once per finished request (only when ``[admin]`` is set): it appends the
record's access-log fields to a bounded ring (the Requests page) and adds the request to its
minute's bucket (the Overview page: requests/s, error rate, TTFT percentiles, tokens and cost per
provider and model over the last hour). A bucket keeps at most ``TTFT_SAMPLES`` first-byte times,
so a busy minute costs bounded memory. Per process: with several workers each one counts its own,
and the console's overview merges them (``export`` here, read from each sibling, and
``overview(others)``); the store-backed ``GET /admin/requests`` and ``/admin/spend`` are the
cross-replica figures.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable
from typing import Any

RECENT = 1000  # request records kept for the Requests page
MINUTES = 60
TTFT_SAMPLES = 2000

FIELDS = (
    "request_id", "dialect", "path", "key", "route", "provider", "upstream_dialect", "upstream_model", "model", "stream",
    "status", "ttfb_ms", "duration_ms", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
    "reasoning_tokens", "stop_reason", "error_kind", "cost_usd", "kind", "cache", "cost_saved_usd",
    "server", "tool",
)  # fmt: skip


def select(
    lines: Iterable[dict[str, Any]],
    limit: int,
    key: str | None = None,
    model: str | None = None,
    status: str | None = None,
    request_id: str | None = None,
) -> list[dict[str, Any]]:
    """The first ``limit`` of ``lines`` (newest first) that pass the Requests page's filters:
    ``status`` is ``error`` (>= 400 or an in-stream error) or one code; ``model`` either name."""
    out = []
    for line in lines:
        if request_id and line.get("request_id") != request_id:
            continue
        if key and line.get("key") != key:
            continue
        if model and model not in (line.get("model"), line.get("upstream_model")):
            continue
        code = line.get("status") or 0
        if status == "error" and code < 400 and line.get("error_kind") is None:
            continue
        if status and status.isdigit() and str(code) != status:
            continue
        out.append(line)
        if len(out) >= limit:
            break
    return out


class Bucket:
    __slots__ = ("minute", "requests", "errors", "ttfts", "by_model")

    def __init__(self, minute: int) -> None:
        self.minute = minute
        self.requests = 0
        self.errors = 0
        self.ttfts: list[float] = []
        self.by_model: dict[
            tuple[str, str], list[Any]
        ] = {}  # (provider, model) -> [requests, input, output, cost or None, cached input, cache hits]


def _merged(own: list[Bucket], exported: list[list[dict[str, Any]]]) -> list[Bucket]:
    """This worker's buckets and the others' as one bucket per minute (copies: ``own`` is untouched)."""
    by_minute: dict[int, Bucket] = {}

    def add(minute: int, requests: int, errors: int, ttfts: list[float], rows: Iterable[tuple[Any, ...]]) -> None:
        bucket = by_minute.get(minute)
        if bucket is None:
            bucket = by_minute[minute] = Bucket(minute)
        bucket.requests += requests
        bucket.errors += errors
        bucket.ttfts += ttfts[: max(0, TTFT_SAMPLES - len(bucket.ttfts))]
        for provider, model, *row in rows:
            acc = bucket.by_model.setdefault((provider, model), [0, 0, 0, None, 0, 0])
            for i in (0, 1, 2, 4, 5):
                acc[i] += row[i]
            if row[3] is not None:
                acc[3] = (acc[3] or 0.0) + row[3]

    for b in own:
        add(b.minute, b.requests, b.errors, b.ttfts, ((p, m, *row) for (p, m), row in b.by_model.items()))
    for buckets in exported:
        for e in buckets:
            add(int(e["minute"]), int(e["requests"]), int(e["errors"]), list(e["ttfts"]), e["by_model"])
    return [by_minute[m] for m in sorted(by_minute)]


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


class Recent:
    def __init__(self, size: int = RECENT) -> None:
        self.records: deque[dict[str, Any]] = deque(maxlen=size)
        self.buckets: deque[Bucket] = deque(maxlen=MINUTES)

    def note(self, record: Any) -> None:
        line = {name: getattr(record, name, None) for name in FIELDS}
        now = time.time()
        line["ts"] = now
        self.records.append(line)
        minute = int(now // 60)
        if not self.buckets or self.buckets[-1].minute != minute:
            self.buckets.append(Bucket(minute))
        bucket = self.buckets[-1]
        bucket.requests += 1
        if record.status >= 400 or record.error_kind is not None:
            bucket.errors += 1
        if record.ttfb_ms is not None and len(bucket.ttfts) < TTFT_SAMPLES:
            bucket.ttfts.append(record.ttfb_ms)
        if record.provider is not None:
            key = (record.provider, record.upstream_model or record.model or "")
            row = bucket.by_model.get(key)
            if row is None:
                row = bucket.by_model[key] = [0, 0, 0, None, 0, 0]  # cost None until priced: never a silent 0
            row[0] += 1
            if record.cache == "hit":  # answered by the response cache: no upstream tokens
                row[5] += 1
            else:
                row[1] += record.input_tokens or 0
                row[2] += record.output_tokens or 0
                row[4] += record.cache_read_tokens or 0
            if line["cost_usd"] is not None:
                row[3] = (row[3] or 0.0) + line["cost_usd"]

    def latest(
        self,
        limit: int = 200,
        key: str | None = None,
        model: str | None = None,
        status: str | None = None,
        request_id: str | None = None,
    ) -> list[dict[str, Any]]:
        return select(reversed(self.records), limit, key, model, status, request_id)

    def export(self) -> list[dict[str, Any]]:
        """The last hour's buckets as JSON-ready data, for another worker's ``overview(others)``."""
        now_minute = int(time.time() // 60)
        return [
            {
                "minute": b.minute,
                "requests": b.requests,
                "errors": b.errors,
                "ttfts": b.ttfts,
                "by_model": [[p, m, *row] for (p, m), row in b.by_model.items()],
            }
            for b in self.buckets
            if now_minute - b.minute < MINUTES
        ]

    def overview(self, others: Iterable[list[dict[str, Any]]] = ()) -> dict[str, Any]:
        """The last hour, one point per minute (oldest first), and totals per provider/model; with
        ``others`` (other workers' ``export``), the figures of every worker together."""
        now_minute = int(time.time() // 60)
        live = [b for b in self.buckets if now_minute - b.minute < MINUTES]
        exported = list(others)
        if exported:
            live = _merged(live, exported)
        series = [
            {
                "minute": b.minute * 60,
                "requests": b.requests,
                "rps": round(b.requests / 60, 3),
                "error_rate": round(b.errors / b.requests, 4) if b.requests else 0.0,
                "ttft_p50": _percentile(b.ttfts, 0.5),
                "ttft_p95": _percentile(b.ttfts, 0.95),
            }
            for b in live
        ]
        totals: dict[tuple[str, str], list[Any]] = {}
        ttfts: list[float] = []
        requests = errors = 0
        for b in live:
            requests += b.requests
            errors += b.errors
            ttfts += b.ttfts
            for k, row in b.by_model.items():
                acc = totals.setdefault(k, [0, 0, 0, None, 0, 0])
                for i in (0, 1, 2, 4, 5):
                    acc[i] += row[i]
                if row[3] is not None:
                    acc[3] = (acc[3] or 0.0) + row[3]
        last = live[-1] if live and live[-1].minute == now_minute else None
        input_total = sum(r[1] for r in totals.values())
        cached_total = sum(r[4] for r in totals.values())
        return {
            "now": time.time(),
            "requests": requests,
            "errors": errors,
            "error_rate": round(errors / requests, 4) if requests else 0.0,
            "rps_now": round(last.requests / max(1.0, time.time() - now_minute * 60), 3) if last else 0.0,
            "ttft_p50": _percentile(ttfts, 0.5),
            "ttft_p95": _percentile(ttfts, 0.95),
            # the share of input tokens upstreams read from their prompt caches; and exact repeats answered here
            "input_cache_hit_rate": round(cached_total / input_total, 4) if input_total else None,
            "response_cache_hits": sum(r[5] for r in totals.values()),
            "series": series,
            "by_model": [
                {
                    "provider": p,
                    "model": m,
                    "requests": int(r[0]),
                    "input_tokens": int(r[1]),
                    "output_tokens": int(r[2]),
                    "cached_input_tokens": int(r[4]),
                    "input_cache_hit_rate": round(r[4] / r[1], 4) if r[1] else None,
                    "response_cache_hits": int(r[5]),
                    "cost_usd": None if r[3] is None else round(r[3], 9),
                }
                for (p, m), r in sorted(totals.items(), key=lambda kv: -kv[1][0])
            ],
        }
