"""What the MCP gateway adds to a tool call: the official SDK's client calling a streamable-HTTP
MCP server's tool directly and through the gateway's ``/mcp``, sequentially, per revision family.

    PYTHONPATH=. python bench/mcp_cost.py [calls] [--process]

Prints p50 / p95 in ms for each (direct, via gateway) × (2026-07-28, the initialize handshake).
Everything is on 127.0.0.1: the server is tests/mcp/doubles.py's ``files`` (the SDK's ``MCPServer``),
the gateway a real uvicorn with the gateway's own server layer, access log off — in this process
(a thread: three event loops share one GIL), or with ``--process`` as ``python -m gateway serve``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


async def _timed(client: Any, tool: str, calls: int) -> tuple[float, float]:
    for _ in range(20):  # warm-up
        await client.call_tool(tool, {"path": "x"})
    took = []
    for _ in range(calls):
        start = time.perf_counter()
        await client.call_tool(tool, {"path": "x"})
        took.append((time.perf_counter() - start) * 1000)
    took.sort()
    return statistics.median(took), took[int(len(took) * 0.95)]


def main(calls: int) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from tests.mcp.conftest import KEYS, mcp_client, mcp_config
    from tests.mcp.doubles import FILES_TOKEN, Counting, files_server
    from tests.support.fake_upstream import ServerThread

    logging.disable(logging.WARNING)
    os.environ["FILES_MCP_TOKEN"] = FILES_TOKEN
    with ServerThread(Counting(files_server().streamable_http_app())) as files:
        config = mcp_config(f"{files.url}/mcp")
        config["server"]["access_log"] = False
        with _gateway(config) as gateway_url:

            async def run() -> None:
                for mode in ("auto", "legacy"):
                    async with httpx2.AsyncClient(headers={"x-files-token": FILES_TOKEN}) as http:
                        transport = streamable_http_client(f"{files.url}/mcp", http_client=http)
                        async with Client(transport, cache=None, mode=mode) as client:
                            direct = await _timed(client, "read_file", calls)
                    async with mcp_client(f"{gateway_url}/mcp", KEYS["search"], mode=mode) as client:
                        via = await _timed(client, "files_read_file", calls)
                    label = "2026-07-28" if mode == "auto" else "handshake"
                    print(f"{label:>10}: direct p50 {direct[0]:.2f} ms p95 {direct[1]:.2f} ms · "
                          f"via gateway p50 {via[0]:.2f} ms p95 {via[1]:.2f} ms")  # fmt: skip

            asyncio.run(run())


@contextmanager
def _gateway(config: dict[str, Any]) -> Iterator[str]:
    """The gateway in this process (a thread), or with ``--process`` in its own (``python -m gateway``)."""
    from gateway.server.app import create_app
    from gateway.server.protocol import uvicorn_options
    from gateway.settings import Settings
    from tests.support.fake_upstream import ServerThread, free_port

    if "--process" not in sys.argv:
        with ServerThread(create_app(Settings(**config)), **uvicorn_options()) as server:
            yield server.url
        return
    from tests.support.processes import start_gateway_process

    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gateway.toml"
        config = {**config, "server": {**config["server"], "port": port}}
        path.write_text(_toml(config))
        proc, url = start_gateway_process(path, port)
        try:
            yield url
        finally:
            proc.terminate()
            proc.wait(10)


def _toml(config: dict[str, Any]) -> str:
    """Just enough TOML for the bench's config: tables, arrays of tables, inline values as JSON."""
    lines: list[str] = []
    for name, value in config.items():
        if isinstance(value, dict):
            lines.append(f"[{name}]")
            lines += [f"{k} = {json.dumps(v)}" for k, v in value.items()]
        else:
            for entry in value:
                lines.append(f"[[{name}]]")
                for k, v in entry.items():
                    if isinstance(v, dict):
                        inner = ", ".join(f"{ik} = {json.dumps(iv)}" for ik, iv in v.items())
                        lines.append(f"{k} = {{ {inner} }}")
                    else:
                        lines.append(f"{k} = {json.dumps(v)}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main(int(next((a for a in sys.argv[1:] if a.isdigit()), "300")))
