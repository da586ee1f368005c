"""The response head goes out with the first body bytes: one socket write for a whole answer."""

from __future__ import annotations

import asyncio
import socket

import httpx
import uvicorn

from gateway.server.coalesce import HeadHolding
from gateway.server.protocol import uvicorn_options


class Recording:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str) -> str:
        return f"info:{name}"


def test_head_and_body_are_one_write_and_a_lone_head_goes_out_on_the_next_turn() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        rec = Recording()
        t = HeadHolding(rec, loop)  # type: ignore[arg-type]
        t.write(b"HTTP/1.1 100 Continue\r\n\r\n")  # an interim answer is never held
        assert rec.writes == [b"HTTP/1.1 100 Continue\r\n\r\n"]
        t.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
        assert len(rec.writes) == 1
        t.write(b"{}")
        assert rec.writes[1] == b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"
        t.write(b"more")
        assert rec.writes[2] == b"more"
        await asyncio.sleep(0)
        assert len(rec.writes) == 3  # the scheduled flush finds nothing held
        assert t.get_extra_info("peername") == "info:peername"

        rec2 = Recording()
        t2 = HeadHolding(rec2, loop)  # type: ignore[arg-type]
        t2.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        assert rec2.writes == []
        await asyncio.sleep(0)  # a stream whose first event is not there yet: the head alone, next turn
        assert rec2.writes == [b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"]

        rec3 = Recording()
        t3 = HeadHolding(rec3, loop)  # type: ignore[arg-type]
        t3.write(b"HTTP/1.1 200 OK\r\n\r\n")
        t3.close()  # closing never loses the held head
        assert rec3.writes == [b"HTTP/1.1 200 OK\r\n\r\n"] and rec3.closed

    asyncio.run(main())


def test_a_real_server_still_answers_whole_and_streamed_through_it() -> None:
    async def app(scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] != "http":
            return
        if scope["path"] == "/stream":
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
            for i in range(3):
                await asyncio.sleep(0.01)
                await send({"type": "http.response.body", "body": b"part%d " % i, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
            return
        body = b'{"ok":true}'
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))],
            }
        )
        await send({"type": "http.response.body", "body": body})

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]

    async def main() -> None:
        config = uvicorn.Config(app, log_level="warning", lifespan="off", **uvicorn_options())
        server = uvicorn.Server(config)
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.01)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            await asyncio.sleep(0.2)  # everything the server wrote is there by now
            first = await reader.read(65536)
            assert first.startswith(b"HTTP/1.1 200 ") and first.endswith(b'{"ok":true}')
            writer.close()
            async with httpx.AsyncClient() as client:
                r = await client.get(f"http://127.0.0.1:{port}/stream")
                assert r.text == "part0 part1 part2 "
                r = await client.get(f"http://127.0.0.1:{port}/")
                assert r.json() == {"ok": True}
        finally:
            server.should_exit = True
            await task

    asyncio.run(main())
