"""Accounting of one ``tools/call``: the access-log line, the key's limits, spend, metrics, a span.

Every call, refused or answered, is one ``AccessRecord`` of ``"kind": "mcp"`` finished by the
same ``Observer.finish`` as a model call (so the access log, ``GET /admin/requests``, the ledger's
spend and the console's requests page see it), with ``server`` and ``tool`` set and ``status`` an
HTTP-like code: 200 answered (``error_kind`` ``"tool_error"`` when the result has ``isError``), 403
not allowed for the key, 404 no such tool, 429 a limit, 502 the server is down or answered a
JSON-RPC error, 504 it did not answer within its timeout.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from prometheus_client import Counter, Gauge

from gateway.telemetry.observe import AccessRecord, request_id_for

if TYPE_CHECKING:
    from gateway.asgi import Scope
    from gateway.governance.keys import KeySpec
    from gateway.mcp.upstream import Upstream
    from gateway.relay.state import GatewayState
    from gateway.telemetry.traces import RequestTrace

# access-log status -> the metric's status label
STATUS_WORDS = {200: "ok", 403: "forbidden", 404: "unknown_tool", 429: "refused", 502: "server_error", 504: "timeout"}


class McpMetrics:
    def __init__(self, registry: Any, upstreams: dict[str, Upstream]) -> None:
        self.calls = Counter(
            "gateway_mcp_calls",
            "MCP tools/call requests by server, tool and outcome",
            ["server", "tool", "status"],
            registry=registry,
        )
        self.up = Gauge(
            "gateway_mcp_server_up", "1 when the MCP server's session is live", ["server"], registry=registry
        )
        self.tools = Gauge("gateway_mcp_server_tools", "Tools an MCP server lists now", ["server"], registry=registry)
        for upstream in upstreams.values():
            self.up.labels(upstream.name).set_function(_is_up(upstream))
            self.tools.labels(upstream.name).set_function(_tool_count(upstream))


def _is_up(upstream: Upstream) -> Callable[[], float]:
    return lambda: 1.0 if upstream.up else 0.0


def _tool_count(upstream: Upstream) -> Callable[[], float]:
    return lambda: float(len(upstream.tools)) if upstream.up else 0.0


class CallRecord:
    """One ``tools/call`` from start to its log line."""

    def __init__(self, state: GatewayState, metrics: McpMetrics, scope: Scope, spec: KeySpec | None, name: str) -> None:
        self.state, self.metrics = state, metrics
        request_id = scope.get("gateway.mcp.request_id") or request_id_for(scope)
        self.record = AccessRecord(request_id, "mcp", scope.get("path", "/mcp"), kind="mcp")
        self.record.key = spec.name if spec is not None else None
        self.record.tool = self.record.model = name
        self.trace: RequestTrace | None = None
        self.span: Any = None
        tel = state.telemetry
        if tel is not None:
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])}
            self.trace = tel.start(scope, headers, "mcp", self.record)
            self.trace.span.attributes["gen_ai.operation.name"] = "execute_tool"

    def server(self, upstream: Upstream, tool: str) -> None:
        """The call goes to ``upstream``'s ``tool``: its span starts (GenAI semantic conventions)."""
        self.record.server = upstream.name
        if self.trace is not None:
            self.span = self.trace.child(
                f"execute_tool {self.record.tool}",
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": self.record.tool,
                    "gen_ai.tool.type": "extension",
                    "gen_ai.tool.call.id": self.record.request_id,
                    "mcp.method.name": "tools/call",
                    "gateway.mcp.server": upstream.name,
                    "gateway.mcp.server_tool": tool,
                },
            )

    def finish(self, status: int, error_kind: str | None = None) -> None:
        record = self.record
        record.status, record.error_kind = status, error_kind
        if self.span is not None:
            self.span.end_ns = time.time_ns()
            if error_kind is not None:
                self.span.attributes["error.type"] = error_kind
                self.span.error = error_kind
        self.state.observer.finish(record)
        if self.state.console is not None:
            self.state.console.note(record)
        if self.trace is not None:
            self.trace.finish(record)
        word = "error" if error_kind == "tool_error" else STATUS_WORDS.get(status, str(status))
        self.metrics.calls.labels(record.server or "", record.tool or "", word).inc()
