"""A request's spans as plain data (``PlainSpan``) and the attribute sets they share (``Base``).

Why plain data and not the SDK's spans: ``gateway/telemetry/traces.py`` (``Telemetry``). Why shared
bases: most of a span's attributes are the same for every request of a route, or every attempt at a
model on a provider; a span holds its base beside its own few attributes, so the loop copies
nothing per request and the export thread writes each base's OTLP bytes once
(``gateway/telemetry/otlp_wire.py``, ``encode_plain``).
"""

from __future__ import annotations

from random import getrandbits
from time import time_ns
from typing import Any, Protocol


class Origin(Protocol):
    """What made a span (``traces.Telemetry``): it turns one into the SDK's ``ReadableSpan``."""

    def readable(self, span: PlainSpan) -> Any: ...


SERVER, CLIENT = 2, 3  # OTLP's Span.SpanKind numbers
BASES_MAX = 1024  # shared attribute sets per process: routes x dialects, providers x models; a bound against a surprise
EXTENDED_MAX = 256  # the variants of one base (Base.extended) ...
EXTENDED_TOTAL_MAX = 16384  # ... and of all of them: a caller's model names must not grow the process without bound


class Base:
    """The attributes every span of one kind shares (a route's, a provider and model's), made once
    and never changed: a span holds it beside its own ``attributes``, so the loop copies nothing and
    the export thread writes its OTLP bytes once (``wire``, set there), not per span. ``labels``: the
    GenAI metrics' attributes of an attempt (low cardinality), as ``GenAIMetrics`` keys its series."""

    __slots__ = ("name", "attributes", "labels", "wire", "_extended")
    kept = 0  # extended variants kept, all bases (the loop's only)

    def __init__(self, attributes: dict[str, Any], labels: tuple[tuple[str, Any], ...] = (), name: str = "") -> None:
        self.name = name  # the spans' name
        self.attributes = attributes
        self.labels = labels
        self.wire: bytes | None = None
        self._extended: dict[tuple[tuple[str, Any], ...], Base] = {}

    def extended(self, items: tuple[tuple[str, Any], ...]) -> Base:
        """This base with ``items`` added: made once per distinct ``items`` and shared, so values most
        requests repeat (a route's model, the status, the provider, the stop reason) are written to the
        wire once, not per span. ``items`` hold low-cardinality values of one type per key (a bool is
        never stood in for by an int: they compare equal)."""
        base = self._extended.get(items)
        if base is None:
            base = Base({**self.attributes, **dict(items)}, self.labels, self.name)
            if len(self._extended) < EXTENDED_MAX and Base.kept < EXTENDED_TOTAL_MAX:
                self._extended[items] = base
                Base.kept += 1
        return base


class PlainSpan:
    """A span being described: plain data until the request ends (see ``RequestTrace``). Then, with
    the gateway's own batcher (``gateway/telemetry/export.py``), it is addressed (``trace_id``,
    ``parent_id``, ``remote``, ``kind``, ``trace_state``, ``origin``) and queued as it is: the export
    thread writes its OTLP bytes (``otlp_wire.encode_plain``); no SDK object is made for it."""

    __slots__ = (
        "span_id",
        "name",
        "start_ns",
        "end_ns",
        "attributes",
        "error",
        "base",
        "trace_id",
        "parent_id",
        "remote",
        "kind",
        "trace_state",
        "origin",
    )
    # set when the request ends (RequestTrace._finish): trace_state is a caller's raw tracestate
    # header (validated on the export thread) or a sampler's TraceState; origin the Telemetry
    trace_id: int
    parent_id: int
    remote: bool
    kind: int
    trace_state: Any
    origin: Origin

    def __init__(self, name: str, attributes: dict[str, Any], base: Base | None = None) -> None:
        self.span_id = getrandbits(64) or 1
        self.name = name
        self.start_ns = time_ns()
        self.end_ns = 0
        self.attributes = attributes  # the span's own; a key set here wins over the base's
        self.error: str | None = None
        self.base = base

    def all_attributes(self) -> dict[str, Any]:
        """The base's attributes and the span's own, as one mapping (what the SDK's span would hold)."""
        base = self.base
        return {**base.attributes, **self.attributes} if base is not None else self.attributes
