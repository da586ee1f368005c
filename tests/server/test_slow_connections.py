"""Hostile connections (issue 18, item 4), with real sockets and small configured bounds.

80 connections that never finish a request (no bytes; half a head; a head dripped byte by byte;
half a body) are all closed within their bounds while normal requests keep being served; an idle
kept-alive connection is closed after the keep-alive timeout; beyond ``max_connections`` a request
gets a 503 in its caller's dialect.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from gateway.server.app import create_app
from gateway.server.protocol import uvicorn_options
from gateway.settings import Settings
from tests.conftest import gateway_config
from tests.support.fake_upstream import ServerThread

HEAD_S, BODY_S, KEEP_S = 1.0, 1.5, 1.0
SLACK = 1.5  # scheduling on a loaded 2-core machine

BODY = orjson.dumps({"model": "demo", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
HEAD = f"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {len(BODY)}\r\n\r\n".encode()


def bounded_gateway(fake: Any, **server: Any) -> ServerThread:
    limits = {"request_head_timeout": HEAD_S, "request_body_timeout": BODY_S, "keep_alive_timeout": KEEP_S, **server}
    return ServerThread(
        create_app(Settings(**gateway_config(f"http://127.0.0.1:{fake.port}", **limits))), **uvicorn_options()
    )


@pytest.fixture(scope="module")
def slow_gateway(fake: Any) -> Iterator[ServerThread]:
    with bounded_gateway(fake) as server:
        yield server


async def hostile(port: int, kind: str) -> tuple[str, float, bytes]:
    """Open one connection that never finishes its request; return how long until the gateway closed it."""
    started = time.monotonic()  # before connecting: the server's clock starts at its accept, not later
    reader, writer = await asyncio.open_connection("127.0.0.1", port)

    async def drip() -> None:
        if kind == "half-head":
            writer.write(HEAD[: len(HEAD) // 2])
        elif kind == "half-body":
            writer.write(HEAD + BODY[: len(BODY) // 2])
        elif kind == "drip":  # one byte at a time, faster than the bound: activity must not extend it
            for byte in HEAD[:-2]:
                writer.write(bytes([byte]))
                await asyncio.sleep(0.2)

    sender = asyncio.ensure_future(drip())
    received = b""
    try:
        while True:
            chunk = await asyncio.wait_for(reader.read(65536), HEAD_S + BODY_S + 10)
            if not chunk:
                break
            received += chunk
    except (ConnectionResetError, BrokenPipeError):
        pass
    finally:
        sender.cancel()
        writer.close()
    return kind, time.monotonic() - started, received


async def normal_traffic(url: str, until: float) -> list[float]:
    latencies = []
    async with httpx.AsyncClient(timeout=10) as client:
        while time.monotonic() < until:
            started = time.monotonic()
            response = await client.post(
                url + "/v1/messages", content=BODY, headers={"content-type": "application/json"}
            )
            assert response.status_code == 200, response.text
            latencies.append(time.monotonic() - started)
            await asyncio.sleep(0.05)
    return latencies


def test_80_unfinished_requests_are_all_closed_within_the_bounds_while_others_are_served(slow_gateway: Any) -> None:
    async def main() -> tuple[list[tuple[str, float, bytes]], list[float]]:
        kinds = ["nothing", "half-head", "drip", "half-body"] * 20
        traffic = asyncio.ensure_future(normal_traffic(slow_gateway.url, time.monotonic() + HEAD_S + BODY_S + 1))
        results = await asyncio.gather(*(hostile(slow_gateway.port, k) for k in kinds))
        return results, await traffic

    results, latencies = asyncio.run(main())
    assert len(results) == 80
    for kind, elapsed, received in results:
        bound = BODY_S if kind == "half-body" else HEAD_S
        assert bound - 0.2 <= elapsed <= bound + SLACK, (kind, elapsed)
        if kind == "nothing":
            assert received == b"", received  # nothing asked, nothing answered
        else:  # part of a request arrived: a 408 in the dialect its path names (Anthropic here)
            assert received.startswith(b"HTTP/1.1 408 "), (kind, received[:200])
            payload = orjson.loads(received.split(b"\r\n\r\n", 1)[1])
            if kind == "drip":  # only "POST " arrived: no path to tell the dialect by, so OpenAI's shape
                assert payload["error"]["code"] == "timeout", payload
                continue
            assert payload.get("type") == "error" and payload["error"]["type"] == "timeout_error", (kind, payload)
    assert len(latencies) >= 10, latencies
    assert max(latencies) < 1.0, latencies  # served promptly all along


def test_an_idle_kept_alive_connection_is_closed_after_the_keep_alive_timeout(slow_gateway: Any) -> None:
    async def main() -> tuple[bytes, float]:
        reader, writer = await asyncio.open_connection("127.0.0.1", slow_gateway.port)
        writer.write(HEAD + BODY)
        answer = await reader.readuntil(b"\r\n\r\n")
        length = int(
            next(line.split(b":")[1] for line in answer.split(b"\r\n") if line.lower().startswith(b"content-length"))
        )
        await reader.readexactly(length)
        idle_from = time.monotonic()
        rest = await asyncio.wait_for(reader.read(), KEEP_S + 10)
        writer.close()
        return answer + rest, time.monotonic() - idle_from

    answer, idle = asyncio.run(main())
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert KEEP_S - 0.2 <= idle <= KEEP_S + SLACK, idle


def test_a_kept_alive_connection_gets_a_new_head_bound_per_request(slow_gateway: Any) -> None:
    async def main() -> tuple[bytes, float]:
        reader, writer = await asyncio.open_connection("127.0.0.1", slow_gateway.port)
        await asyncio.sleep(HEAD_S * 0.6)  # well inside the first head bound
        writer.write(HEAD + BODY)
        first = await reader.readuntil(b"\r\n\r\n")
        writer.write(HEAD[:10])  # the next request starts, and stalls
        started = time.monotonic()
        rest = await asyncio.wait_for(reader.read(), HEAD_S + 10)
        writer.close()
        return first + rest, time.monotonic() - started

    answer, elapsed = asyncio.run(main())
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert b"HTTP/1.1 408 " in answer
    assert elapsed <= HEAD_S + SLACK, elapsed


def test_beyond_max_connections_a_request_gets_a_503_in_its_dialect(fake: Any) -> None:
    async def main(port: int, url: str) -> tuple[list[httpx.Response], httpx.Response]:
        idle = [await asyncio.open_connection("127.0.0.1", port) for _ in range(3)]
        await asyncio.sleep(0.1)
        async with httpx.AsyncClient(timeout=10) as client:
            refused = [
                await client.post(url + "/v1/messages", content=BODY, headers={"content-type": "application/json"}),
                await client.post(
                    url + "/v1/chat/completions",
                    json={"model": "demo", "messages": [{"role": "user", "content": "hi"}]},
                ),
                await client.post(
                    url + "/v1beta/models/demo:generateContent", json={"contents": [{"parts": [{"text": "hi"}]}]}
                ),
            ]
        for _, writer in idle:
            writer.close()
        await asyncio.sleep(0.3)
        async with httpx.AsyncClient(timeout=10) as client:
            served = await client.post(url + "/v1/messages", content=BODY, headers={"content-type": "application/json"})
        return refused, served

    with bounded_gateway(fake, max_connections=3) as server:
        refused, served = asyncio.run(main(server.port, server.url))
    anthropic, chat, gemini = refused
    for response in refused:
        assert response.status_code == 503, response.text
        assert response.headers["retry-after"] == "1"
    assert anthropic.json()["error"]["type"] == "overloaded_error"
    assert chat.json()["error"]["code"] == "service_unavailable"
    assert gemini.json()["error"]["status"] == "UNAVAILABLE"
    assert served.status_code == 200, served.text


def test_a_head_larger_than_max_head_bytes_is_431_and_closed(slow_gateway: Any) -> None:
    async def main() -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", slow_gateway.port)

        async def flood() -> None:  # 200 × 4 KiB of one header value, well within the head timeout
            try:
                writer.write(b"POST /v1/messages HTTP/1.1\r\nhost: x\r\nx-filler: ")
                for _ in range(200):
                    writer.write(b"a" * 4096)
                    await writer.drain()
                    await asyncio.sleep(0.001)
            except (ConnectionResetError, BrokenPipeError):
                pass

        sender = asyncio.ensure_future(flood())
        received = b""
        try:
            while chunk := await asyncio.wait_for(reader.read(65536), 5):
                received += chunk
        except ConnectionResetError:
            pass
        sender.cancel()
        writer.close()
        return received

    answer = asyncio.run(main())
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    payload = orjson.loads(answer.split(b"\r\n\r\n", 1)[1])
    assert payload["type"] == "error" and payload["error"]["type"] == "request_too_large"
