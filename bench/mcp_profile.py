"""Where a ``tools/call`` through the gateway's ``/mcp`` spends its time: cProfile over the gateway's
own thread (its event loop: the SDK's request handling, the gateway's hooks, the upstream call).

    PYTHONPATH=. python bench/mcp_profile.py [calls] [--sort tottime|cumtime] [--json] [--list N] [--callers RE] [--focus RE] [--plain]

The setting is bench/mcp_cost.py's (the files server, the gateway in a thread, access log off);
the caller is plain ``httpx`` (one ``tools/call`` per POST, revision 2025-06-18, SSE or with
``--json`` a JSON answer); with ``--list N`` the request is ``tools/list`` with the files server's
tools padded to N (a large catalog: what a ``tools/list`` costs per tool). The profiler is switched on and off inside the gateway's thread by the
first and last request (``x-profile`` header), so only the gateway's loop is measured. Prints the
p50 per call and the top functions.
"""

from __future__ import annotations

import logging
import os
import statistics
import sys
import time
from typing import Any

sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]
import cProfile  # noqa: E402  (after: bench/profile.py would shadow the standard library's profile)
import pstats  # noqa: E402


class Profiled:
    """ASGI wrapper: ``x-profile: on`` / ``off`` switches cProfile in the server's own thread."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.profile = cProfile.Profile()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            switch = dict(scope["headers"]).get(b"x-profile")
            if switch == b"on":
                self.profile.enable()
            elif switch == b"off":
                self.profile.disable()
                await send({"type": "http.response.start", "status": 204, "headers": []})
                await send({"type": "http.response.body", "body": b""})
                return
        await self.app(scope, receive, send)


def main(calls: int) -> None:
    import httpx

    from gateway.server.app import create_app
    from gateway.server.protocol import uvicorn_options
    from gateway.settings import Settings
    from tests.mcp.conftest import KEYS, mcp_config, wait_ready
    from tests.mcp.doubles import FILES_TOKEN, Counting, files_server
    from tests.support.fake_upstream import ServerThread

    logging.disable(logging.WARNING)
    os.environ["FILES_MCP_TOKEN"] = FILES_TOKEN
    json_only = "--json" in sys.argv
    sort = sys.argv[sys.argv.index("--sort") + 1] if "--sort" in sys.argv else "tottime"
    with ServerThread(Counting(files_server().streamable_http_app())) as files:
        config = mcp_config(f"{files.url}/mcp")
        config["server"]["access_log"] = False
        app = Profiled(create_app(Settings(**config)))
        with ServerThread(app, **uvicorn_options()) as gateway:
            wait_ready(gateway.url, ["files"])
            if "--list" in sys.argv:
                pad = int(sys.argv[sys.argv.index("--list") + 1])
                upstream = app.app.state.gateway.mcp.upstreams["files"]
                schema = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
                padded = [
                    {"name": f"read_pad_{i}", "description": f"pad {i}", "inputSchema": schema} for i in range(pad)
                ]
                upstream.tools = upstream.tools + padded
            headers = {
                "authorization": f"Bearer {KEYS['search']}",
                "accept": "application/json" if json_only else "application/json, text/event-stream",
                "mcp-protocol-version": "2025-06-18",
                "content-type": "application/json",
            }
            body = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"files_read_file","arguments":{"path":"a"}}}'
            expect = b"contents of a"
            if "--list" in sys.argv:
                body, expect = b'{"jsonrpc":"2.0","id":7,"method":"tools/list"}', b"files_read_file"
            with httpx.Client(base_url=gateway.url, headers=headers, timeout=30) as http:
                for _ in range(30):
                    answer = http.post("/mcp", content=body)
                    assert expect in answer.content, answer.text
                took = []
                if "--plain" not in sys.argv:  # (--plain: the same run without the profiler, for the p50)
                    http.post("/mcp", content=body, headers={"x-profile": "on"})
                for _ in range(calls):
                    start = time.perf_counter()
                    http.post("/mcp", content=body)
                    took.append((time.perf_counter() - start) * 1000)
                http.post("/mcp", content=b"", headers={"x-profile": "off"})
    took.sort()
    print(f"{calls} calls: p50 {statistics.median(took):.2f} ms p90 {took[int(calls * 0.9)]:.2f} ms"
          + (" (not profiled)" if "--plain" in sys.argv else " (profiled)"))  # fmt: skip
    if "--plain" in sys.argv:
        return
    stats = pstats.Stats(app.profile)
    by_package: dict[str, float] = {}
    for (filename, _, _), (_, _, tottime, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        by_package[_package(filename)] = by_package.get(_package(filename), 0.0) + tottime
    total = sum(by_package.values())
    print("own time by package (ms per call):")
    for name, seconds in sorted(by_package.items(), key=lambda kv: -kv[1])[:14]:
        print(f"  {name:<28} {seconds / calls * 1000:6.3f}  {seconds / total:5.1%}")
    if "--focus" in sys.argv:  # the named functions only (a regex over file:line(function))
        stats.sort_stats("cumtime").print_stats(sys.argv[sys.argv.index("--focus") + 1])
    else:
        stats.sort_stats(sort).print_stats(40)
    if "--callers" in sys.argv:
        stats.print_callers(sys.argv[sys.argv.index("--callers") + 1])


def _package(filename: str) -> str:
    """``mcp.server``, ``anyio``, ``gateway.mcp``, ``asyncio`` … for a profiled function's file."""
    if "site-packages/" in filename:
        parts = filename.split("site-packages/", 1)[1].split("/")
        return ".".join(parts[:2]) if parts[0] in ("mcp", "gateway") and len(parts) > 2 else parts[0]
    if "/gateway/" in filename:
        parts = filename.split("/gateway/", 1)[1].split("/")
        return "gateway." + parts[0] if len(parts) > 1 else "gateway"
    if "python3." in filename:
        parts = filename.split("/")
        return parts[-2] if parts[-2] == "asyncio" else "stdlib"
    return filename if filename.startswith("~") or filename.startswith("{") else "other"


if __name__ == "__main__":
    main(int(next((a for a in sys.argv[1:] if a.isdigit()), "300")))
