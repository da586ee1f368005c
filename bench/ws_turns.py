"""Per-turn latency of a 10-turn tool loop: Responses over WebSocket vs HTTP, through the gateway.

    PYTHONPATH=. .venv/bin/python bench/ws_turns.py [--loops 5] [--turns 10] [--upstream anthropic]

A Codex-like session: a ~24 KB first turn (instructions and tools, as Codex sends), then each turn
answers the model's tool call with a ~2 KB tool output. Over HTTP the caller resends the whole
history every turn (``store: false``, Codex's HTTP fallback, on a kept-alive connection); over the
WebSocket it sends only the new item and ``previous_response_id`` (the gateway keeps the turns).
The upstream is the tests' fake on loopback (recorded ``tool_call`` stream of ``--upstream``'s
dialect), so the figures are the gateway's and the wire's share of a turn, not a model's. Prints the
median and p90 per turn (send of the request to its ``response.completed``) for each transport, and
per turn index, where the HTTP cost grows with the history and the socket's does not.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
import orjson
import websockets

from gateway.server.app import create_app
from gateway.server.protocol import uvicorn_options
from gateway.settings import Settings
from tests.conftest import gateway_config
from tests.support.fake_upstream import FakeUpstream, ServerThread, free_port

INSTRUCTIONS = "You are a coding agent working in a repository. Follow the rules below.\n" + (
    "Rule: keep edits small, run the tests, explain what changed. " * 300
)
TOOLS = [
    {
        "type": "function",
        "name": f"tool_{i}",
        "description": "A tool of the agent. " * 20,
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "text": {"type": "string"}}},
    }
    for i in range(12)
]
OUTPUT = "line of a file the tool read\n" * 70  # ~2 KB per tool result


def body(model: str, items: list[dict[str, Any]], previous: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "model": model,
        "instructions": INSTRUCTIONS,
        "tools": TOOLS,
        "input": items,
        "store": False,
    }
    if previous is not None:
        out["previous_response_id"] = previous
    return out


def next_items(response: dict[str, Any]) -> list[dict[str, Any]]:
    call = next(item for item in response["output"] if item["type"] == "function_call")
    return [{"type": "function_call_output", "call_id": call["call_id"], "output": OUTPUT}]


SENT: dict[str, list[int]] = {"http": [], "ws": []}  # request bytes per turn, by transport


def http_loop(url: str, model: str, turns: int) -> list[float]:
    times = []
    history: list[dict[str, Any]] = [{"role": "user", "content": "fix the failing test"}]
    with httpx.Client(base_url=url, timeout=30) as client:
        for _ in range(turns):
            started = time.perf_counter()
            completed = None
            payload = orjson.dumps({**body(model, history, None), "stream": True})
            SENT["http"].append(len(payload))
            headers = {"content-type": "application/json"}
            with client.stream("POST", "/v1/responses", content=payload, headers=headers) as r:
                for line in r.iter_lines():
                    if line.startswith("data:") and '"response.completed"' in line:
                        completed = orjson.loads(line[5:])["response"]
            times.append(time.perf_counter() - started)
            assert completed is not None
            history = [*history, *completed["output"], *next_items(completed)]  # the whole history again
    return times


async def ws_loop(url: str, model: str, turns: int) -> list[float]:
    times = []
    items: list[dict[str, Any]] = [{"role": "user", "content": "fix the failing test"}]
    previous = None
    async with websockets.connect(url, max_size=None) as ws:
        for _ in range(turns):
            started = time.perf_counter()
            frame_text = orjson.dumps({"type": "response.create", **body(model, items, previous)}).decode()
            SENT["ws"].append(len(frame_text))
            await ws.send(frame_text)
            while True:
                frame = orjson.loads(await ws.recv())
                if frame["type"] == "response.completed":
                    break
                assert frame["type"] != "error", frame
            times.append(time.perf_counter() - started)
            previous = frame["response"]["id"]
            items = next_items(frame["response"])  # only the new item
    return times


def summary(times: list[float]) -> str:
    ordered = sorted(times)
    p90 = ordered[int(len(ordered) * 0.9) - 1]
    return f"median {statistics.median(times) * 1000:6.2f} ms   p90 {p90 * 1000:6.2f} ms"


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child(port: int) -> None:
    """The gateway and the fake upstream in their own process, so its CPU can be read per loop."""
    upstream = FakeUpstream()
    with ServerThread(upstream) as up:
        upstream.port = up.port
        settings = Settings(**gateway_config(f"http://127.0.0.1:{up.port}"))
        with ServerThread(create_app(settings), port=port, **uvicorn_options()):
            print("ready", flush=True)
            sys.stdin.read()  # until the parent closes it


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--loops", type=int, default=5)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--upstream", default="anthropic")
    parser.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    model = f"{args.upstream}--tool_call"
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child", str(port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None and proc.stdin is not None
    assert proc.stdout.readline().strip() == "ready"
    url, ws_address = f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}/v1/responses"
    http: list[list[float]] = []
    ws: list[list[float]] = []
    cpu: dict[str, list[float]] = {"http": [], "ws": []}
    try:
        http_loop(url, model, 2)  # warm both paths
        asyncio.run(ws_loop(ws_address, model, 2))
        for _ in range(args.loops):  # interleaved, so load on the machine hits both alike
            before = cpu_seconds(proc.pid)
            http.append(http_loop(url, model, args.turns))
            middle = cpu_seconds(proc.pid)
            ws.append(asyncio.run(ws_loop(ws_address, model, args.turns)))
            cpu["http"].append(middle - before)
            cpu["ws"].append(cpu_seconds(proc.pid) - middle)
    finally:
        proc.stdin.close()
        proc.wait(timeout=20)
    per_turn = {k: sum(v) / (len(v) * args.turns) * 1000 for k, v in cpu.items()}  # (10 ms ticks: summed)
    flat_http = [t for loop in http for t in loop]
    flat_ws = [t for loop in ws for t in loop]
    print(f"{args.loops} loops x {args.turns} turns, upstream {args.upstream}")
    print(f"HTTP (whole history each turn): {summary(flat_http)}")
    print(f"WebSocket (new items only):     {summary(flat_ws)}")
    print("turn  HTTP ms  WS ms")
    for n in range(args.turns):
        h = statistics.median(loop[n] for loop in http) * 1000
        w = statistics.median(loop[n] for loop in ws) * 1000
        print(f"{n + 1:4d}  {h:7.2f}  {w:6.2f}")
    total_http = statistics.median(sum(loop) for loop in http) * 1000
    total_ws = statistics.median(sum(loop) for loop in ws) * 1000
    print(f"whole loop: HTTP {total_http:.1f} ms, WebSocket {total_ws:.1f} ms")
    last = {k: v[-1] / 1024 for k, v in SENT.items()}
    mean = {k: sum(v) / len(v) / 1024 for k, v in SENT.items()}
    print(
        f"request bytes per turn: HTTP {mean['http']:.1f} KiB (turn {args.turns}: {last['http']:.1f} KiB), "
        f"WebSocket {mean['ws']:.1f} KiB (turn {args.turns}: {last['ws']:.1f} KiB)"
    )
    print(f"gateway + fake upstream CPU per turn: HTTP {per_turn['http']:.2f} ms, WebSocket {per_turn['ws']:.2f} ms")


if __name__ == "__main__":
    main()
