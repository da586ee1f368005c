"""Access log and Prometheus metrics: one record per request, written off the hot path.

The relay fills an ``AccessRecord`` as the request goes; ``finish`` turns it into one JSON log line
(handed to a background thread by a ``QueueHandler``) and metric updates.

Usage is what the upstream reported, however the request ended: the relay merges every ``Usage``
event and, at the end, what the upstream's decoder had read (``EventSource.usage_so_far``), so a
cut, a timeout, a hang-up or an in-stream refusal keeps the counts that had arrived. ``None`` means
"not reported", never 0; a request that an upstream answered without any usage is marked
``usage_missing: true`` and logged as a warning naming the provider, so it is not a silent gap in
the token counters.
"""

from __future__ import annotations

import logging
import operator
import sys
import time
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Protocol

import orjson
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from gateway.asgi import Scope, header
from gateway.events import Usage
from gateway.random_ids import random_hex
from gateway.telemetry.access_writer import AccessWriter
from gateway.telemetry.loop_lag import BUCKETS as LAG_BUCKETS

if TYPE_CHECKING:
    from gateway.store.counters import Hold

access_log = logging.getLogger("gateway.access")
log = logging.getLogger("gateway.observe")


def request_id_for(scope: Scope) -> str:
    """The id a request is known by: the caller's ``x-request-id`` when it sent one, else a new
    one. Sent back as the ``x-request-id`` response header before any byte of the body (so every
    stream carries it from its first event) and written in the access log line."""
    return header(scope, b"x-request-id") or "req_" + random_hex(12)


@dataclass(slots=True)
class AccessRecord:
    request_id: str
    dialect: str
    path: str
    started: float = field(default_factory=time.perf_counter)
    key: str | None = None  # the named key's name (never the secret), set at authentication
    route: str | None = None
    provider: str | None = None
    upstream_dialect: str | None = None
    upstream_model: str | None = None
    model: str | None = None
    stream: bool | None = None
    status: int = 200
    ttfb_ms: float | None = None
    duration_ms: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None
    stop_reason: str | None = None
    raw_stop_reason: str | None = None
    error_kind: str | None = None
    attempts: list[dict[str, Any]] = field(default_factory=list)
    trace_id: str | None = None  # the OpenTelemetry trace (telemetry on): find this request in the tracing backend
    dropped: list[str] = field(
        default_factory=list
    )  # request settings the upstream was sent without (gateway/dialects/carry.py)
    guardrails: list[dict[str, Any]] = field(default_factory=list)  # which acted: {name, action, where, types}
    usage_missing: bool = False  # an upstream answered and reported no usage at all (set by finish)
    cost_usd: float | None = None  # set by the ledger at finish; None when unpriced
    unpriced: bool = False
    response_started: bool = False  # the caller's HTTP response has begun (no error response possible)
    hold: Hold | None = (
        None  # what the request holds in the store's limits until settled (gateway/governance/limits.py)
    )
    response_done: bool = False  # the caller's response was sent in full (a later disconnect is not a 499)
    kind: str = "chat"  # what was asked: "chat" (a model call), "embeddings" (gateway/relay/embeddings.py)
    usage_estimated: bool = False  # input_tokens is the gateway's estimate: the upstream reported none
    cache: str | None = None  # the response cache: hit | miss | bypass (None: [cache] off)
    cost_saved_usd: float | None = None  # a cache hit: what the answer cost when it was first paid for
    transport: str = "http"  # "websocket": a turn on a Responses WebSocket (gateway/server/websocket.py)
    server: str | None = None  # an MCP tools/call ("kind": "mcp", gateway/mcp/): the [[mcp_servers]] name
    tool: str | None = None  # and the tool as listed to the caller ("<server>_<tool>")

    def first_byte(self) -> None:
        if self.ttfb_ms is None:
            self.ttfb_ms = round((time.perf_counter() - self.started) * 1000, 2)

    def add_usage(self, usage: Usage | None) -> None:
        """Merge cumulative usage: each field the upstream stated replaces the earlier value; a field
        it did not state (``None``) keeps what an earlier report said. Never summed."""
        if usage is None:
            return
        if usage.input is not None:
            self.input_tokens = usage.input
        if usage.output is not None:
            self.output_tokens = usage.output
        if usage.cache_read is not None:
            self.cache_read_tokens = usage.cache_read
        if usage.cache_write is not None:
            self.cache_write_tokens = usage.cache_write
        if usage.reasoning is not None:
            self.reasoning_tokens = usage.reasoning


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "gateway_requests",
            "Requests by caller dialect, provider and status",
            ["dialect", "provider", "status"],
            registry=r,
        )
        self.active_streams = Gauge("gateway_active_streams", "Streams being relayed now", registry=r)
        self.websockets_open = Gauge(
            "gateway_websocket_connections", "Responses WebSocket connections open now", registry=r
        )
        self.upstream_open = Gauge("gateway_upstream_open_connections", "Upstream responses open now", registry=r)
        self.upstream_pooled = Gauge(
            "gateway_upstream_pool_connections", "Upstream sockets open now, busy and idle", ["provider"], registry=r
        )
        self.ttfb = Histogram(
            "gateway_time_to_first_byte_seconds",
            "Time to first byte sent to the caller",
            ["dialect", "provider"],
            registry=r,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
        )
        self.duration = Histogram(
            "gateway_request_duration_seconds",
            "Whole request duration",
            ["dialect", "provider"],
            registry=r,
            buckets=(0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
        )
        self.tokens = Counter("gateway_tokens", "Tokens by provider and kind", ["provider", "kind"], registry=r)
        self.upstream_errors = Counter(
            "gateway_upstream_errors", "Upstream failures by provider and kind", ["provider", "kind"], registry=r
        )
        self.retries = Counter("gateway_retries", "Upstream attempts beyond the first", ["provider"], registry=r)
        self.fallbacks = Counter(
            "gateway_fallbacks", "Requests answered by a fallback provider", ["provider"], registry=r
        )
        self.cost = Counter(
            "gateway_cost_usd",
            "Spend in USD by named key, provider and upstream model",
            ["key", "provider", "model"],
            registry=r,
        )
        self.budget_remaining = Gauge(
            "gateway_budget_remaining_usd", "Budget left in the current period, by named key", ["key"], registry=r
        )
        self.refusals = Counter(
            "gateway_refusals", "Requests refused by a key's limits, by key and reason", ["key", "reason"], registry=r
        )
        self.guardrail_actions = Counter(
            "gateway_guardrail_actions",
            "Guardrails that acted on a request or an answer (gateway/guardrails/)",
            ["guardrail", "action", "where"],
            registry=r,
        )
        self.dropped = Counter(
            "gateway_dropped_settings",
            "Request settings sent upstream without (gateway/dialects/carry.py)",
            ["provider", "field"],
            registry=r,
        )

        self.cache_requests = Counter(
            "gateway_cache_requests", "Response cache lookups by route and result", ["route", "result"], registry=r
        )
        self.cache_saved = Counter("gateway_cache_saved_usd", "Spend the response cache saved, in USD", registry=r)
        self.cached_input = Counter(
            "gateway_cached_input_tokens",
            "Input tokens the upstream read from its prompt cache, by route and target (provider:model)",
            ["route", "target"],
            registry=r,
        )
        self.loop_lag = Histogram(
            "gateway_event_loop_lag_seconds",
            "How late the event loop woke a timer, sampled every 0.25 s (gateway/telemetry/loop_lag.py)",
            registry=r,
            buckets=LAG_BUCKETS,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)


USAGE_WARNING_SECONDS = 60.0


class Settles(Protocol):
    """What prices and settles every finished record (``gateway.governance.ledger.Ledger``, a layer above)."""

    def finish(self, record: AccessRecord, line: dict[str, Any]) -> None: ...


class Observer:
    """Owns the metrics and the background access-log writer."""

    def __init__(self, enabled: bool = True) -> None:
        self.metrics = Metrics()
        self._children: dict[tuple[str, str, int], tuple[Any, Any, Any]] = {}  # (dialect, provider, status)
        self._tokens: dict[tuple[str, str], Any] = {}  # (provider, kind)
        self.ledger: Settles | None = None  # gateway.governance.ledger.Ledger: prices and settles every finished record
        # the access log's writer thread (access_writer.py), None with the log off; a handler on
        # ``gateway.access`` gets the lines through logging instead (finish)
        self._writer = AccessWriter(sys.stdout) if enabled else None
        self._usage_warned: dict[str, tuple[float, int]] = {}  # provider -> (last warning, requests since)

    def _warn_usage_missing(self, record: AccessRecord) -> None:
        """A warning naming the provider; at most one per provider every ``USAGE_WARNING_SECONDS``
        (an upstream that never reports usage would otherwise write one per request), saying how
        many requests went without since the last one. Every log line has ``usage_missing``."""
        provider = record.provider or ""
        now = time.monotonic()
        last, since = self._usage_warned.get(provider, (-USAGE_WARNING_SECONDS, 0))
        if now - last < USAGE_WARNING_SECONDS:
            self._usage_warned[provider] = (last, since + 1)
            return
        self._usage_warned[provider] = (now, 0)
        more = f"; {since} more without usage since the last warning" if since else ""
        log.warning(
            "provider %s reported no token usage for request %s (%s)%s",
            provider,
            record.request_id,
            record.error_kind or "completed",
            more,
        )

    def stop(self) -> None:
        if self._writer is not None:
            self._writer.stop()

    def finish(self, record: AccessRecord) -> None:
        record.duration_ms = round((time.perf_counter() - record.started) * 1000, 2)
        m = self.metrics
        provider = record.provider or ""
        if record.provider is not None and record.input_tokens is None and record.output_tokens is None:
            record.usage_missing = True
            self._warn_usage_missing(record)
        line = None
        if self.ledger is not None:
            line = log_line(record)
            self.ledger.finish(record, line)  # cost_usd onto the record and the line; settles once
        # each metric child looked up once per label set (prometheus_client's labels() is ~5 µs a call)
        children = self._children.get((record.dialect, provider, record.status))
        if children is None:
            children = self._children[(record.dialect, provider, record.status)] = (
                m.requests.labels(record.dialect, provider, str(record.status)),
                m.duration.labels(record.dialect, provider),
                m.ttfb.labels(record.dialect, provider),
            )
        children[0].inc()
        children[1].observe(record.duration_ms / 1000)
        if record.ttfb_ms is not None:
            children[2].observe(record.ttfb_ms / 1000)
        if record.cache != "hit":  # a replayed answer's tokens were counted once, when it was first paid for
            for kind, value in (
                ("input", record.input_tokens),
                ("output", record.output_tokens),
                ("cache_read", record.cache_read_tokens),
                ("cache_write", record.cache_write_tokens),
                ("reasoning", record.reasoning_tokens),
            ):
                if value:
                    counter = self._tokens.get((provider, kind))
                    if counter is None:
                        counter = self._tokens[(provider, kind)] = m.tokens.labels(provider, kind)
                    counter.inc(value)
            if record.cache_read_tokens:
                target = f"{provider}:{record.upstream_model or ''}"
                m.cached_input.labels(record.route or "", target).inc(record.cache_read_tokens)
        for name in record.dropped:
            m.dropped.labels(provider, name).inc()
        for acted in record.guardrails:
            m.guardrail_actions.labels(acted["name"], acted["action"], acted["where"]).inc()
        for attempt in record.attempts:
            if attempt.get("error"):
                m.upstream_errors.labels(attempt["provider"], attempt["error"]).inc()
        if len(record.attempts) > 1:
            first = record.attempts[0]["provider"]
            for attempt in record.attempts[1:]:
                if attempt["provider"] == first:
                    m.retries.labels(attempt["provider"]).inc()
            if record.provider and record.provider != first and record.status < 400:
                m.fallbacks.labels(record.provider).inc()
        if self._writer is not None:
            data = orjson.dumps(line if line is not None else log_line(record))
            if access_log.handlers:  # someone listens (a logging config, a test): through logging
                access_log.info(data.decode())
            else:
                self._writer.put(data)


_LOGGED = tuple(
    f.name for f in fields(AccessRecord) if f.name not in ("started", "response_started", "response_done", "hold")
)


_LOGGED_VALUES = operator.attrgetter(*_LOGGED)  # all the fields in one C call


def log_line(record: AccessRecord) -> dict[str, Any]:
    """The access-log fields of ``record`` (also the request record of ``GET /admin/requests``)."""
    line = dict(zip(_LOGGED, _LOGGED_VALUES(record), strict=True))
    line["attempts"] = [dict(a) for a in record.attempts]
    line["ts"] = time.time()
    return line
