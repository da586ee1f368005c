"""A burst of upstream events goes out in one caller write; spaced-out tokens are never held back.

The upstream is a raw loopback server that sends a 40-token OpenAI chat stream either in one
socket write or one event every 30 ms; the gateway (real uvicorn) is wrapped in an ASGI middleware
that counts the body messages it sends to the caller (an Anthropic SDK-shaped streaming request).
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.support.fake_upstream import ServerThread

TOKENS = [f"tok{i} " for i in range(40)]


def chat_events() -> list[bytes]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        obj = {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return b"data: " + orjson.dumps(obj) + b"\n\n"

    usage = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [],
        "usage": {"prompt_tokens": 5, "completion_tokens": 40, "total_tokens": 45},
    }
    return (
        [chunk({"role": "assistant", "content": ""})]
        + [chunk({"content": t}) for t in TOKENS]
        + [chunk({}, "stop"), b"data: " + orjson.dumps(usage) + b"\n\n", b"data: [DONE]\n\n"]
    )


class BurstUpstream:
    """HTTP/1.1 on raw sockets: each request gets the stream at once or ``gap`` seconds apart."""

    def __init__(self) -> None:
        self.gap = 0.0
        self.loop = asyncio.new_event_loop()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self._sock = sock
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._serve, sock=self._sock))
        self.loop.run_forever()
        server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.lower().split(b"\r\n")
                    if line.startswith(b"content-length:")
                )
                await reader.readexactly(length)
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                )
                events = chat_events()
                if self.gap == 0:
                    writer.write(b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n")
                else:
                    for e in events:
                        writer.write(b"%x\r\n%s\r\n" % (len(e), e))
                        await writer.drain()
                        await asyncio.sleep(self.gap)
                    writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


class CountBodyWrites:
    """ASGI middleware: how many non-empty body messages each response sent."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.counts: list[int] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        count = 0

        async def counting_send(message: dict[str, Any]) -> None:
            nonlocal count
            if message["type"] == "http.response.body" and message.get("body"):
                count += 1
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        finally:
            self.counts.append(count)


@pytest.fixture(scope="module")
def setup() -> Iterator[tuple[BurstUpstream, CountBodyWrites, ServerThread]]:
    upstream = BurstUpstream()
    upstream.thread.start()
    settings = Settings(
        server={"access_log": False, "keepalive_seconds": 0},
        auth={"keys_env": ""},
        store={"url": "sqlite://:memory:"},
        providers=[
            {
                "name": "up",
                "dialect": "openai-chat",
                "base_url": f"http://127.0.0.1:{upstream.port}/v1",
                "api_key": "k",
                "max_retries": 0,
            }
        ],
        routes=[{"model": "*", "provider": "up"}],
    )
    app = CountBodyWrites(create_app(settings))
    with ServerThread(app) as server:
        yield upstream, app, server
    upstream.loop.call_soon_threadsafe(upstream.loop.stop)


def stream_text(url: str) -> tuple[str, float]:
    body = {"model": "m", "max_tokens": 100, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    text, started = "", time.perf_counter()
    first = 0.0
    with httpx.stream(
        "POST", url + "/v1/messages", json=body, headers={"anthropic-version": "2023-06-01"}, timeout=10
    ) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: ") and '"text_delta"' in line:
                text += orjson.loads(line[6:])["delta"]["text"]
                first = first or time.perf_counter() - started
    return text, first


def writes_of_next_response(app: CountBodyWrites, before: int) -> int:
    deadline = time.monotonic() + 5
    while len(app.counts) <= before and time.monotonic() < deadline:  # the app returns just after the last byte
        time.sleep(0.01)
    return app.counts[before]


def test_a_burst_of_events_goes_out_in_a_few_writes(setup: Any) -> None:
    upstream, app, server = setup
    upstream.gap = 0.0
    before = len(app.counts)
    text, _ = stream_text(server.url)
    assert text == "".join(TOKENS)
    writes = writes_of_next_response(app, before)
    # 44 upstream events arrived in one read: the first token is flushed at once, the rest in one write.
    assert writes <= 3, writes


def test_spaced_tokens_are_written_as_they_arrive(setup: Any) -> None:
    upstream, app, server = setup
    upstream.gap = 0.03
    before = len(app.counts)
    text, first = stream_text(server.url)
    assert text == "".join(TOKENS)
    writes = writes_of_next_response(app, before)
    assert first < 0.5  # the first token did not wait for the rest (the stream takes ~1.3 s)
    assert writes >= 30, writes  # one write per token (give or take a merged read)
