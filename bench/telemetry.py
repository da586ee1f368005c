"""What tracing adds to one request: the exact calls the relay makes, timed in-process.

End-to-end CPU per stream (bench/run.py) moves by ±0.1 ms between runs on a shared box, more than
the 50 µs this has to fit in, so the telemetry work is measured on its own: per request the relay
calls ``Telemetry.start`` (SERVER span, traceparent extraction), ``RequestTrace.request``, one
``attempt_started_for`` / ``attempt_opened`` (CLIENT span, time to first chunk) and ``finish``
(usage, finish reasons, both spans ended, GenAI metrics recorded). Spans go through the gateway's
real ``BoundedBatchProcessor``; the variants:

* ``request path``: the exporter discards (what the request's own coroutine pays);
* ``+ traceparent``: the caller sent a W3C ``traceparent`` / ``tracestate``;
* ``+ capture_content``: prompts and completions serialised onto the spans;
* ``with OTLP export``: the gateway's OTLP/HTTP exporter (``WireSpanExporter``, as ``[telemetry]`` makes it)
  to a loopback collector in another process; ``paced``: the same at ~2,000 requests/s (``run``).

Times are CPU time (``time.thread_time`` for the request's own thread, ``time.process_time`` for all
threads: the export thread's protobuf encoding and POSTs included), not wall time, so a busy shared
box does not count the time this process waited for a core.

Telemetry off costs nothing to measure: ``state.telemetry`` is ``None`` and the relay's only work is
that one ``is not None`` check per request (no span, no SDK call). Run:
``.venv/bin/python bench/telemetry.py [-n 20000]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from gateway.events import BlockStart, End, MessageStart, TextDelta, Usage
from gateway.ir import ChatRequest, Message, TextPart
from gateway.routing.router import Resolved, Target
from gateway.settings import ProviderSettings
from gateway.telemetry.export import BoundedBatchProcessor, WireSpanExporter
from gateway.telemetry.metrics import GenAIMetrics
from gateway.telemetry.observe import AccessRecord
from gateway.telemetry.traces import Telemetry
from gateway.upstream.providers import Provider

SINK = r"""
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200); self.send_header("content-type", "application/x-protobuf"); self.send_header("content-length", "0"); self.end_headers()
    def log_message(self, *a): pass
s = ThreadingHTTPServer(("127.0.0.1", 0), H); print(s.server_address[1], flush=True); s.serve_forever()
"""


class Discard(SpanExporter):
    def export(self, spans: Any) -> SpanExportResult:
        return SpanExportResult.SUCCESS


class DiscardMetrics(MetricExporter):
    def export(self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        pass


def telemetry(span_exporter: SpanExporter, metric_exporter: MetricExporter, capture: bool) -> Telemetry:
    guard = BoundedBatchProcessor(span_exporter, None)
    return Telemetry(guard, GenAIMetrics(metric_exporter), capture_content=capture, guard=guard)


def one_request(
    tel: Telemetry,
    headers: dict[str, str],
    provider: Provider,
    req: ChatRequest,
    resolved: Resolved,
    first: list[Any],
    rest: list[Any],
) -> float:
    """One request's telemetry calls; returns the seconds spent before the first byte could go out."""
    scope = {"path": "/v1/messages", "method": "POST", "scheme": "http"}
    record = AccessRecord("req_0123456789abcdef01234567", "anthropic", "/v1/messages")
    started = time.thread_time()
    trace = tel.start(scope, headers, "anthropic", record)
    trace.request(req, resolved)
    span = trace.attempt_started_for(provider, resolved.targets[0], req, 0, True)
    trace.attempt_opened(span, first)
    before_first_byte = time.thread_time() - started
    if trace.output is not None:  # what the streaming loop does per batch with capture_content
        trace.output.extend(first)
        trace.output.extend(rest)
    record.provider, record.input_tokens, record.output_tokens, record.cache_read_tokens = "up", 120, 50, 0
    record.stop_reason, record.raw_stop_reason = "stop", "end_turn"
    record.attempts = [{"provider": "up"}]
    trace.finish(record)
    return before_first_byte


def run(tel: Telemetry, n: int, headers: dict[str, str], paced: bool = False) -> tuple[float, float, float, float]:
    """``paced``: 20 requests, then 10 ms asleep (~2,000 requests/s), as an event loop waits on I/O between
    requests: the export thread then runs beside a loop that keeps waking up (caches cold, the GIL
    changing hands), which costs it ~2-3x what it costs back to back. Back to back, the loop can outrun
    the export thread: the spans it drops (``queue_full``, last column) were never encoded, and the
    all-threads figure is then too low."""
    provider = Provider(ProviderSettings(name="up", dialect="anthropic", base_url="https://api.anthropic.com"))
    req = ChatRequest(
        model="claude-sonnet-4-5",
        messages=[Message("user", [TextPart("What's the weather in Paris?")])],
        max_tokens=1024,
        temperature=0.7,
        stream=True,
    )
    resolved = Resolved("claude-*", (Target("up", "claude-sonnet-4-5"),))
    first = [
        MessageStart("msg_01XFDUDYJgAACzvnptvVoYEL", "claude-sonnet-4-5-20250929"),
        BlockStart(0, "text"),
        TextDelta(0, "Hello"),
    ]
    rest = [TextDelta(0, " there") for _ in range(48)] + [Usage(120, 50), End("stop", "end_turn")]
    for _ in range(500):  # warm up
        one_request(tel, headers, provider, req, resolved, first, rest)
    thread, cpu, ttfb = time.thread_time(), time.process_time(), 0.0
    for i in range(n):
        ttfb += one_request(tel, headers, provider, req, resolved, first, rest)
        if paced and i % 20 == 19:
            time.sleep(0.01)
    thread_us = (time.thread_time() - thread) / n * 1e6
    tel.processor.force_flush()
    tel.metrics.force_flush()  # type: ignore[union-attr]
    dropped = tel.guard.dropped.labels("queue_full")._value.get() if tel.guard is not None else 0.0
    return ttfb / n * 1e6, thread_us, (time.process_time() - cpu) / n * 1e6, dropped


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=20000, help="requests per variant")
    args = ap.parse_args(argv)
    traceparent = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "vendor=abc"}
    rows = []
    os.environ.pop("OTEL_TRACES_SAMPLER", None)
    variants: list[tuple[str, dict[str, str], bool, str | None]] = [
        ("request path", {}, False, None),
        ("+ traceparent", traceparent, False, None),
        ("+ capture_content", {}, True, None),
        ("sampled out (OTEL_TRACES_SAMPLER=traceidratio, arg 0)", {}, False, "traceidratio"),
    ]
    for name, headers, capture, sampler in variants:
        if sampler:
            os.environ["OTEL_TRACES_SAMPLER"], os.environ["OTEL_TRACES_SAMPLER_ARG"] = sampler, "0"
        else:
            os.environ.pop("OTEL_TRACES_SAMPLER", None)
        tel = telemetry(Discard(), DiscardMetrics(), capture)
        rows.append((name, *run(tel, args.n, headers)))
        tel.shutdown()
    os.environ.pop("OTEL_TRACES_SAMPLER", None)
    sink = subprocess.Popen([sys.executable, "-c", SINK], stdout=subprocess.PIPE, text=True)
    try:
        port = int(sink.stdout.readline())  # type: ignore[union-attr]
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

        tel = telemetry(
            WireSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces"),
            OTLPMetricExporter(endpoint=f"http://127.0.0.1:{port}/v1/metrics"),
            False,
        )
        rows.append(("with OTLP export", *run(tel, args.n, {})))
        tel.shutdown()
        tel = telemetry(
            WireSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces"),
            OTLPMetricExporter(endpoint=f"http://127.0.0.1:{port}/v1/metrics"),
            False,
        )
        rows.append(("with OTLP export, paced (~2,000 requests/s)", *run(tel, args.n // 2, {}, paced=True)))
        tel.shutdown()
    finally:
        sink.terminate()
    print(f"{args.n} requests per variant, Python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.1f}\n")
    print(
        "| variant | CPU µs before the first byte | CPU µs per request, request's thread"
        " | CPU µs per request, all threads | spans dropped (queue full) |"
    )
    print("|---|---:|---:|---:|---:|")
    for name, ttfb, thread, cpu, dropped in rows:
        print(f"| {name} | {ttfb:.1f} | {thread:.1f} | {cpu:.1f} | {dropped:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
