"""Gateway CPU per embeddings request, against a whole (non-streamed) chat request on the same harness.

    .venv/bin/python bench/embeddings_cost.py [-n 1000]

Starts a loopback upstream (this file with ``--serve``: a raw asyncio HTTP/1.1 server with
pre-built answers, 1,536-dimension vectors as floats or base64) and the gateway as subprocesses,
sends ``-n`` requests per case one at a time over one keep-alive connection, and reads the
gateway's utime + stime from ``/proc`` (bench/run.py's ``cpu_seconds``) before and after: CPU µs
per request, the caller's and the upstream's CPU not included.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import subprocess
import sys
import tempfile
import time
from array import array
from pathlib import Path
from typing import Any

import httpx
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.run import cpu_seconds, free_port, gateway_python, stop, wait_http  # noqa: E402

DIMS = 1536
VALUES = [((i * 7919) % 2001 - 1000) / 1024 for i in range(DIMS)]
B64 = base64.b64encode(array("f", VALUES).tobytes()).decode()
CHAT = orjson.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1,
        "model": "bench",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "Hello from the bench."}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
    }
)
_cache: dict[tuple[str, int], bytes] = {}


def answer(path: str, body: dict[str, Any]) -> bytes:
    if path.endswith("/chat/completions"):
        return CHAT
    if path.endswith(":batchEmbedContents"):
        n = len(body["requests"])
        key = ("gemini", n)
        if key not in _cache:
            _cache[key] = orjson.dumps({"embeddings": [{"values": VALUES}] * n})
        return _cache[key]
    value = body["input"]
    n = len(value) if isinstance(value, list) else 1
    encoding = body.get("encoding_format", "float")
    key = (encoding, n)
    if key not in _cache:
        vector: Any = B64 if encoding == "base64" else VALUES
        data = [{"object": "embedding", "index": i, "embedding": vector} for i in range(n)]
        _cache[key] = orjson.dumps(
            {"object": "list", "data": data, "model": "m", "usage": {"prompt_tokens": n, "total_tokens": n}}
        )
    return _cache[key]


async def serve(port: int) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                path = lines[0].split(" ")[1].split("?")[0]
                length = next(
                    int(v) for k, _, v in (h.partition(":") for h in lines[1:]) if k.lower() == "content-length"
                )
                body = orjson.loads(await reader.readexactly(length)) if length else {}
                payload = answer(path, body)
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                    + str(len(payload)).encode()
                    + b"\r\n\r\n"
                    + payload
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


def config(gw_port: int, up_port: int) -> str:
    up = f"http://127.0.0.1:{up_port}"
    return f"""
[server]
port = {gw_port}
access_log = false
[auth]
keys_env = ""
[store]
url = "sqlite://:memory:"
[[providers]]
name = "openai"
dialect = "openai-chat"
base_url = "{up}/v1"
api_key = "sk-bench"
[[providers]]
name = "gemini"
dialect = "gemini"
base_url = "{up}"
api_key = "bench"
[[routes]]
model = "chat"
provider = "openai"
upstream_model = "gpt-bench"
[[routes]]
model = "emb-openai"
provider = "openai"
upstream_model = "text-embedding-3-small"
[[routes]]
model = "emb-gemini"
provider = "gemini"
upstream_model = "gemini-embedding-001"
"""


def cases() -> list[tuple[str, str, dict[str, Any]]]:
    one, hundred = "an input to embed, about a dozen words long, for the bench", [f"input {i}" for i in range(100)]
    chat = {"model": "chat", "messages": [{"role": "user", "content": "Say hello to the bench."}]}
    gem = {"content": {"parts": [{"text": one}]}}
    return [
        ("chat, whole (openai-chat → openai-chat): the reference", "/v1/chat/completions", chat),
        ("1 input, float (openai → openai)", "/v1/embeddings", {"model": "emb-openai", "input": one}),
        (
            "1 input, base64 passed through (openai → openai)",
            "/v1/embeddings",
            {"model": "emb-openai", "input": one, "encoding_format": "base64"},
        ),
        (
            "1 input, base64 from floats (openai → gemini)",
            "/v1/embeddings",
            {"model": "emb-gemini", "input": one, "encoding_format": "base64"},
        ),
        ("1 input (gemini embedContent → gemini)", "/v1beta/models/emb-gemini:embedContent", gem),
        (
            "100 inputs, base64 passed through (openai → openai)",
            "/v1/embeddings",
            {"model": "emb-openai", "input": hundred, "encoding_format": "base64"},
        ),
        ("100 inputs, float (openai → openai)", "/v1/embeddings", {"model": "emb-openai", "input": hundred}),
    ]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=1000)
    parser.add_argument("--serve", type=int)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(args.serve))
        return 0
    up_port, gw_port = free_port(), free_port()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "gateway.toml"
        cfg.write_text(config(gw_port, up_port))
        upstream = subprocess.Popen([sys.executable, __file__, "--serve", str(up_port)])
        gw = subprocess.Popen(
            [gateway_python(), "-m", "gateway", "serve", "--config", str(cfg), "--port", str(gw_port)],
            cwd=tmp,
            env={**os.environ, "PYTHONPATH": str(ROOT)},  # this checkout's gateway, whatever the venv has installed
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_http(f"http://127.0.0.1:{gw_port}/healthz", gw, 30, "the gateway", None)
            time.sleep(0.5)
            print("| request | gateway CPU µs / request | answer bytes |\n|---|---:|---:|")
            with httpx.Client(base_url=f"http://127.0.0.1:{gw_port}", timeout=30) as client:
                for name, path, body in cases():
                    for _ in range(50):  # warm: connections, caches
                        warm = client.post(path, json=body)
                        assert warm.status_code == 200, warm.text
                    before = cpu_seconds(gw.pid)
                    size = 0
                    for _ in range(args.n):
                        response = client.post(path, json=body)
                        assert response.status_code == 200, response.text
                        size = len(response.content)
                    spent = cpu_seconds(gw.pid) - before
                    print(f"| {name} | {spent / args.n * 1e6:,.0f} | {size:,} |")
        finally:
            stop(gw)
            upstream.kill()
            upstream.wait(5)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
