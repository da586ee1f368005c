"""The upstream HTTP/1.1 client: ``GatewayTransport`` under ``httpx.AsyncClient``, against a real
loopback server that answers with scripted bytes; and what a provider's client does on either
transport (``transport = "gateway"`` / ``"httpx"``): TLS, proxies, HTTP/1.0, HTTP/2, auth hooks."""

from __future__ import annotations

import asyncio
import gc
import gzip
from collections.abc import Callable

import httpx
import pytest

from gateway.http.transport import GatewayTransport, UpstreamClient

TRANSPORTS = ["gateway", "httpx"]


class ScriptedServer:
    """Reads each request head (+ content-length body) and lets ``answer`` write the reply."""

    def __init__(self, answer: Callable[[asyncio.StreamWriter, bytes, bytes, int], object]) -> None:
        self.answer = answer
        self.requests: list[tuple[bytes, bytes]] = []
        self.connections = 0
        self.closed_connections = 0
        self.server: asyncio.base_events.Server | None = None
        self.port = 0
        self._writers: set[asyncio.StreamWriter] = set()

    async def __aenter__(self) -> ScriptedServer:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        for writer in self._writers:
            writer.transport.abort()
        await asyncio.sleep(0.01)  # let the handlers see their connections end

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.add(writer)
        self.reader = reader
        index = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = await reader.readexactly(length) if length else b""
                self.requests.append((head, body))
                result = self.answer(writer, head, body, index)
                if asyncio.iscoroutine(result):
                    result = await result
                index += 1
                if result == "close":
                    writer.close()
                    return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self.closed_connections += 1


@pytest.fixture(scope="module", params=["asyncio", "uvloop"])
def event_loop_policy(request: pytest.FixtureRequest) -> asyncio.AbstractEventLoopPolicy:
    """Every test runs on both loops: the gateway serves on uvloop when it is installed."""
    if request.param == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        return uvloop.EventLoopPolicy()
    return asyncio.DefaultEventLoopPolicy()


def chunked(*parts: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


SSE_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def fast_client(transport: GatewayTransport | None = None, **timeouts: float | None) -> UpstreamClient:
    """A client over the gateway's transport, as a provider has (connect and pool timeouts only)."""
    timeout = httpx.Timeout(**{"connect": 10.0, "read": None, "write": None, "pool": 10.0, **timeouts})
    return UpstreamClient(transport=transport or GatewayTransport(), timeout=timeout)


async def send(
    client: httpx.AsyncClient, method: str, url: str, body: bytes | None = b"{}", **kw: object
) -> httpx.Response:
    return await client.send(client.build_request(method, url, content=body, **kw), stream=True)  # type: ignore[arg-type]


async def read_all(response: httpx.Response) -> list[bytes]:
    return [chunk async for chunk in response.aiter_raw()]


async def test_chunks_of_one_socket_read_come_out_as_one_piece_and_the_connection_is_reused() -> None:
    events = [b"data: %d\n\n" % i for i in range(50)]

    def answer(writer, head, body, index):
        writer.write(SSE_HEAD + chunked(*events))

    async with ScriptedServer(answer) as server:
        transport = GatewayTransport()
        async with fast_client(transport) as client:
            for _ in range(3):
                response = await send(
                    client, "POST", server.url + "/v1/x", b'{"a":1}', headers={"content-type": "application/json"}
                )
                assert response.status_code == 200
                assert response.headers["content-type"] == "text/event-stream"
                reads = await read_all(response)
                assert b"".join(reads) == b"".join(events)
                assert len(reads) < 5  # 50 HTTP chunks, a handful of socket reads: aiter_raw yields per read
                await response.aclose()
            assert server.connections == 1 and transport.pool.connections_opened == 1
        head, body = server.requests[0]
        assert head.lower().startswith(b"post /v1/x http/1.1\r\nhost: 127.0.0.1:%d\r\n" % server.port)
        assert b"content-length: 7\r\n" in head.lower() and body == b'{"a":1}'
        assert b"cookie" not in head.lower()


async def test_content_length_and_read_until_close_bodies() -> None:
    def answer(writer, head, body, index):
        if index == 0:
            writer.write(
                b'HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\nretry-after: 2\r\nset-cookie: a=b\r\ncontent-length: 11\r\n\r\n{"e":"429"}'
            )
            return None
        writer.write(b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{"until":"close"}')
        return "close"

    async with ScriptedServer(answer) as server:
        transport = GatewayTransport()
        async with fast_client(transport) as client:
            first = await send(client, "POST", server.url)
            assert (first.status_code, first.headers["retry-after"], await first.aread()) == (429, "2", b'{"e":"429"}')
            await first.aclose()
            assert not client.cookies  # no cookie jar: upstream calls keep none
            second = await send(client, "GET", server.url + "/v1beta/x?stream=true&last_event_id=evt+7", None)
            assert await second.aread() == b'{"until":"close"}'
            await second.aclose()
            assert server.requests[1][0].startswith(b"GET /v1beta/x?stream=true&last_event_id=evt+7 HTTP/1.1\r\n")
            assert (
                b"content-length" not in server.requests[1][0].lower()
                and b"cookie" not in server.requests[1][0].lower()
            )
            assert transport.open_connections == 0  # a read-until-close connection is never reused


async def test_a_kept_alive_connection_the_server_closed_is_replaced_without_an_error() -> None:
    def answer(writer, head, body, index):
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        return "close"  # closes after answering, without saying connection: close

    async with ScriptedServer(answer) as server:
        transport = GatewayTransport()
        async with fast_client(transport) as client:
            for _ in range(3):
                response = await send(client, "POST", server.url)
                assert await response.aread() == b"ok"
                await response.aclose()
                await asyncio.sleep(0.05)
            assert server.connections == 3 and len(server.requests) == 3
            assert transport.open_connections <= 1


async def test_reused_connection_reset_just_after_the_request_is_sent_again() -> None:
    def answer(writer, head, body, index):
        if index == 0:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
            return None
        writer.transport.abort()  # the keep-alive race: the server drops it as our request arrives
        return "close"

    async with ScriptedServer(answer) as server, fast_client() as client:
        response = await send(client, "POST", server.url)
        await response.aread()
        await response.aclose()
        calls = 0
        original = answer

        def second(writer, head, body, index):
            nonlocal calls
            calls += 1
            if calls == 1:
                return original(writer, head, body, 1)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nagain")
            return None

        server.answer = second
        response = await send(client, "POST", server.url)
        assert await response.aread() == b"again"
        await response.aclose()
        assert server.connections == 2


async def test_a_body_cut_mid_way_raises_read_error() -> None:
    def answer(writer, head, body, index):
        writer.write(SSE_HEAD + b"f\r\ndata: partial\n\n\r\n10\r\ndata: ")
        return "close"

    async with ScriptedServer(answer) as server:
        transport = GatewayTransport()
        async with fast_client(transport) as client:
            response = await send(client, "POST", server.url)
            received = b""
            with pytest.raises(httpx.ReadError):
                async for chunk in response.aiter_raw():
                    received += chunk
            assert received.startswith(b"data: partial\n\n")
            await response.aclose()
            assert transport.open_connections == 0


async def test_garbage_is_a_protocol_error_and_a_refused_port_a_connect_error() -> None:
    def answer(writer, head, body, index):
        writer.write(b"SMTP ready\r\n\r\n")

    transport = GatewayTransport()
    async with fast_client(transport) as client:
        async with ScriptedServer(answer) as server:
            with pytest.raises(httpx.RemoteProtocolError):
                await send(client, "POST", server.url)
            port = server.port
        assert transport.open_connections == 0
        with pytest.raises(httpx.ConnectError):
            await send(client, "POST", f"http://127.0.0.1:{port}")
        with pytest.raises(httpx.UnsupportedProtocol):
            await send(client, "POST", "ftp://127.0.0.1/x")


async def test_header_values_with_line_breaks_are_refused() -> None:
    async with fast_client() as client:
        for headers in ({"x-evil": "a\r\nx-api-key: stolen"}, {"x-evil": "a\nb"}, {"x-evil": "a\0b"}):
            with pytest.raises(httpx.LocalProtocolError):
                await send(client, "POST", "http://127.0.0.1:9", headers=headers)


async def test_a_streamed_request_body_is_sent_whole_with_its_length() -> None:
    def answer(writer, head, body, index):
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")

    async def parts():
        yield b'{"a":'
        yield b"1}"

    async with ScriptedServer(answer) as server, fast_client() as client:
        response = await send(client, "POST", server.url, parts())  # type: ignore[arg-type]
        assert await response.aread() == b"ok"
        await response.aclose()
        head, body = server.requests[0]
        assert (
            body == b'{"a":1}' and b"content-length: 7\r\n" in head.lower() and b"transfer-encoding" not in head.lower()
        )


async def test_pool_limit_waits_for_a_released_connection_then_times_out() -> None:
    release = asyncio.Event()

    async def answer(writer, head, body, index):
        writer.write(SSE_HEAD + b"5\r\nhello\r\n")
        await release.wait()
        writer.write(b"0\r\n\r\n")

    async with ScriptedServer(answer) as server:
        transport = GatewayTransport(limits=httpx.Limits(max_connections=1))
        async with fast_client(transport, pool=0.3) as client:
            first = await send(client, "POST", server.url)
            with pytest.raises(httpx.PoolTimeout):
                await send(client, "POST", server.url)
            waiting = asyncio.create_task(send(client, "POST", server.url))
            await asyncio.sleep(0.05)
            release.set()
            assert b"".join(await read_all(first)) == b"hello"
            await first.aclose()
            release.clear()
            second = await asyncio.wait_for(waiting, 2)
            reads = second.aiter_raw()
            assert await anext(reads) == b"hello"
            release.set()
            assert [chunk async for chunk in reads] == []
            await second.aclose()
            assert server.connections == 1 and transport.open_connections == 1


async def test_slow_reader_pauses_the_socket_instead_of_buffering_everything() -> None:
    big = b"x" * 65536
    sent = asyncio.Event()

    async def answer(writer, head, body, index):
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % (len(big) * 160))
        for _ in range(160):  # 10 MiB
            writer.write(big)
            await writer.drain()
        sent.set()

    async with ScriptedServer(answer) as server, fast_client() as client:
        response = await send(client, "GET", server.url, None)
        await asyncio.sleep(0.3)
        assert not sent.is_set()  # the server is blocked on our closed TCP window
        conn = response.stream._stream._conn  # type: ignore[attr-defined]
        assert conn._body_size < 2 * 1024 * 1024
        total = 0
        async for chunk in response.aiter_raw():
            total += len(chunk)
        assert total == len(big) * 160 and sent.is_set()
        await response.aclose()


async def test_cancelling_a_waiting_request_closes_its_connection() -> None:
    async def answer(writer, head, body, index):
        while not server.reader.at_eof():  # until the client hangs up
            await asyncio.sleep(0.005)
        return "close"

    transport = GatewayTransport()
    async with ScriptedServer(answer) as server, fast_client(transport) as client:
        task = asyncio.create_task(send(client, "POST", server.url))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(50):
            if server.closed_connections:
                break
            await asyncio.sleep(0.01)
        assert server.closed_connections == 1 and transport.open_connections == 0


async def test_a_read_timeout_is_httpx_read_timeout_and_closes_the_connection() -> None:
    async def answer(writer, head, body, index):
        writer.write(SSE_HEAD + b"5\r\nhello\r\n")
        await asyncio.sleep(1)

    transport = GatewayTransport()
    async with ScriptedServer(answer) as server, fast_client(transport, read=0.2) as client:
        response = await send(client, "POST", server.url)
        reads = response.aiter_raw()
        assert await anext(reads) == b"hello"
        with pytest.raises(httpx.ReadTimeout):
            await anext(reads)
        await response.aclose()
        assert transport.open_connections == 0


async def test_gzip_body_is_decoded_and_interim_responses_skipped() -> None:
    payload = gzip.compress(b'{"ok": true}')

    async def answer(writer, head, body, index):
        writer.write(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-length: %d\r\n\r\n"
            % len(payload)
        )
        for i in range(len(payload)):  # byte by byte: pieces too short to inflate must not look like the end
            writer.write(payload[i : i + 1])
            await writer.drain()
            await asyncio.sleep(0.001)

    async with ScriptedServer(answer) as server, fast_client() as client:
        response = await send(client, "POST", server.url)
        assert response.status_code == 200 and await response.aread() == b'{"ok": true}'
        await response.aclose()


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("openssl CLI not installed")
    d = tmp_path_factory.mktemp("tls")
    cert, key = str(d / "cert.pem"), str(d / "key.pem")
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            key,
            "-out",
            cert,
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


async def start_sse_server(
    reply: Callable[[bytes], bytes], tls_files: tuple[str, str] | None = None
) -> tuple[asyncio.base_events.Server, int]:
    """A keep-alive server answering each 2-byte-body request with one SSE chunk, ``reply(path)``."""
    import ssl

    ssl_ctx = None
    if tls_files is not None:
        ssl_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ssl_ctx.load_cert_chain(*tls_files)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                await reader.readexactly(2)
                writer.write(SSE_HEAD + chunked(reply(head.split(b" ")[1])))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=ssl_ctx)
    return server, server.sockets[0].getsockname()[1]


def provider_client(transport: str, **settings: object) -> httpx.AsyncClient:
    """The client a provider with these settings gets (``upstream.upstream_client``)."""
    from gateway.settings import ProviderSettings
    from gateway.upstream.providers import upstream_client

    return upstream_client(ProviderSettings(name="p", dialect="openai-chat", transport=transport, **settings))  # type: ignore[arg-type]


def connections_opened(client: httpx.AsyncClient, server_connections: int) -> int:
    transport = client._transport  # type: ignore[attr-defined]
    return transport.pool.connections_opened if isinstance(transport, GatewayTransport) else server_connections


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_https_verifies_the_certificate_against_ca_file(tls_files: tuple[str, str], transport: str) -> None:
    cert, _ = tls_files
    accepted = 0

    def reply(path: bytes) -> bytes:
        return b"data: secure\n\n"

    server, port = await start_sse_server(reply, tls_files)
    server_connections = lambda: len(server._connections) if hasattr(server, "_connections") else 0  # noqa: E731
    try:
        async with provider_client(transport, ca_file=cert) as client:
            for _ in range(2):
                response = await send(client, "POST", f"https://localhost:{port}/v1/messages")
                assert await response.aread() == b"data: secure\n\n"
                await response.aclose()
            if transport == "gateway":
                assert client._transport.pool.connections_opened == 1  # type: ignore[attr-defined]  # kept alive over TLS too
        async with provider_client(transport) as client:
            with pytest.raises(httpx.ConnectError):  # self-signed: not trusted by the system store
                await send(client, "POST", f"https://localhost:{port}/v1/messages")
    finally:
        server.close()
    del accepted, server_connections


async def test_idle_connections_past_their_expiry_are_closed_not_reused() -> None:
    def answer(writer, head, body, index):
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")

    async with ScriptedServer(answer) as server:
        transport = GatewayTransport(limits=httpx.Limits(keepalive_expiry=0.2))
        async with fast_client(transport) as client:
            first = [await send(client, "POST", server.url) for _ in range(3)]  # three at once: three connections
            for response in first:
                await response.aread()
                await response.aclose()
            assert transport.open_connections == 3 and server.connections == 3
            await asyncio.sleep(0.3)
            response = await send(client, "POST", server.url)  # the idle ones expired: a fresh one
            await response.aread()
            await response.aclose()
            assert server.connections == 4
            assert transport.open_connections == 1


async def test_pool_bookkeeping_survives_cancellations_under_contention() -> None:
    import random

    rng = random.Random(7)

    async def answer(writer, head, body, index):
        await asyncio.sleep(rng.random() * 0.01)
        if rng.random() < 0.1:
            writer.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok")
            return "close"
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        return None

    async with ScriptedServer(answer) as server:
        transport = GatewayTransport(limits=httpx.Limits(max_connections=4))
        client = fast_client(transport, pool=5)
        pool = transport.pool
        done = 0

        async def one(i: int) -> None:
            nonlocal done
            response = await send(client, "POST", server.url)
            try:
                if i % 5 == 0:
                    return  # closed unread: the connection is not reused
                assert await response.aread() == b"ok"
                done += 1
            finally:
                await response.aclose()

        tasks = [asyncio.create_task(one(i)) for i in range(200)]
        await asyncio.sleep(0.02)
        for task in tasks[::7]:
            task.cancel()  # some while waiting for a slot, some mid-request
        results = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 30)
        assert all(r is None or isinstance(r, asyncio.CancelledError) for r in results), [
            r for r in results if r is not None
        ][:3]
        assert done > 100
        idle = sum(len(d) for d in pool._idle.values())
        assert pool.open_connections == idle <= 4  # every slot accounted for, none leaked
        assert not pool._waiters or all(w.done() for w in pool._waiters)
        response = await send(client, "POST", server.url)  # and it still works
        assert await response.aread() == b"ok"
        await response.aclose()
        await client.aclose()


def started_provider(transport: str, base_url: str, **settings: object):  # type: ignore[no-untyped-def]
    from gateway.settings import ProviderSettings
    from gateway.upstream.providers import Provider

    provider = Provider(
        ProviderSettings(
            name="azure", dialect="openai-chat", base_url=base_url, api_key="k", transport=transport, **settings
        )
    )  # type: ignore[arg-type]
    return provider


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_provider_keeps_a_query_in_base_url_after_the_path(transport: str) -> None:
    from gateway.dialects.base import UpstreamCall

    def answer(writer, head, body, index):
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}")

    async with ScriptedServer(answer) as server:
        provider = started_provider(transport, server.url + "/openai/deployments/d?api-version=2024-10-21")
        provider.start()
        for _ in range(2):  # the second from the URL cache
            response = await provider.send(
                UpstreamCall(
                    path="/chat/completions",
                    body={"a": 1},
                    params={"alt": "sse"},
                    headers={"anthropic-beta": "x", "authorization": "stolen"},
                )
            )
            await response.aread()
            await provider.close_response(response)
        await provider.close()
        for head, _ in server.requests:
            assert head.startswith(
                b"POST /openai/deployments/d/chat/completions?api-version=2024-10-21&alt=sse HTTP/1.1\r\n"
            )
            lowered = head.lower()
            assert b"authorization: bearer k\r\n" in lowered and b"content-type: application/json\r\n" in lowered
            assert b"anthropic-beta: x\r\n" in lowered and b"stolen" not in lowered
        assert provider.gauge.open == 0


class HeaderAuth(httpx.Auth):
    """What platform auth (SigV4, OAuth, Entra) looks like to the gateway: an httpx.Auth that sees
    the finished request, body included, and signs it."""

    requires_request_body = True

    def auth_flow(self, request: httpx.Request):  # type: ignore[no-untyped-def]
        request.headers["x-signature"] = f"{request.method} {request.url.raw_path.decode()} {len(request.content)}"
        yield request


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_per_request_auth_plugs_in_as_an_httpx_auth_and_no_cycle_is_left(
    transport: str, caplog: pytest.LogCaptureFixture
) -> None:
    from gateway.dialects.base import UpstreamCall

    def answer(writer, head, body, index):
        writer.write(SSE_HEAD + chunked(b"data: 1\n\n", b"data: 2\n\n"))

    async with ScriptedServer(answer) as server:
        provider = started_provider(transport, server.url + "/v1")
        provider.auth = HeaderAuth()
        provider.start()
        call = UpstreamCall(path="/chat/completions", body={"a": 1})

        async def one() -> None:
            response = await provider.send(call)
            assert [chunk async for chunk in response.aiter_raw()]
            await provider.close_response(response)

        await one()  # warm: lazy imports, the pooled connection, the URL cache
        gc.collect()
        gc.disable()
        try:
            with caplog.at_level("INFO"):  # the root at INFO: httpx's own logger stays at WARNING
                for _ in range(20):
                    await one()
            garbage = gc.collect()
        finally:
            gc.enable()
        await provider.close()
        assert b"x-signature: POST /v1/chat/completions 7\r\n" in server.requests[-1][0]
        assert not [
            r for r in caplog.records if r.name == "httpx" and r.levelname == "INFO"
        ]  # no INFO line per request
        if transport == "gateway":
            # The response <-> stream cycle of httpx 0.28 (≈26 objects a stream, ≥ 520 here) is
            # broken: a request's objects are freed by refcount (the loop itself may leave a few).
            assert garbage < 100, garbage
        assert provider.gauge.open == 0


class MiniProxy:
    """An HTTP proxy: ``CONNECT`` tunnels, and absolute-form requests forwarded in origin form."""

    def __init__(self, refuse: bool = False) -> None:
        self.seen: list[bytes] = []  # request lines (and proxy-authorization) as received
        self.refuse = refuse

    async def __aenter__(self) -> MiniProxy:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        from urllib.parse import urlsplit

        try:
            head = await reader.readuntil(b"\r\n\r\n")
            line = head.split(b"\r\n", 1)[0]
            auth = [h for h in head.split(b"\r\n") if h.lower().startswith(b"proxy-authorization:")]
            self.seen.append(line + (b" | " + auth[0] if auth else b""))
            method, target, _ = line.split(b" ")
            if self.refuse:
                writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\ncontent-length: 0\r\n\r\n")
                await writer.drain()
                writer.close()
                return
            if method == b"CONNECT":
                host, port = target.decode().rsplit(":", 1)
                up_reader, up_writer = await asyncio.open_connection(host, int(port))
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                rest = b""
            else:
                url = urlsplit(target.decode())
                up_reader, up_writer = await asyncio.open_connection(url.hostname, url.port)
                origin_form = (url.path or "/") + (f"?{url.query}" if url.query else "")
                rest = head.replace(target, origin_form.encode(), 1)
            up_writer.write(rest)

            async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
                try:
                    while data := await src.read(65536):
                        dst.write(data)
                        await dst.drain()
                finally:
                    dst.close()

            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer), return_exceptions=True)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_upstreams_through_an_http_proxy(tls_files: tuple[str, str], transport: str) -> None:
    cert, _ = tls_files
    echo = lambda path: b"data: " + path + b"\n\n"  # noqa: E731
    tls_server, tls_port = await start_sse_server(echo, tls_files)
    plain_server, plain_port = await start_sse_server(echo)
    try:
        async with MiniProxy() as proxy:
            async with provider_client(
                transport, ca_file=cert, proxy=f"http://user:p%40ss@127.0.0.1:{proxy.port}"
            ) as client:
                for _ in range(2):  # the tunnel is kept alive like any connection
                    response = await send(client, "POST", f"https://localhost:{tls_port}/v1/messages?beta=true")
                    assert await response.aread() == b"data: /v1/messages?beta=true\n\n"
                    await response.aclose()
                response = await send(client, "POST", f"http://127.0.0.1:{plain_port}/v1/chat/completions")
                assert await response.aread() == b"data: /v1/chat/completions\n\n"
                await response.aclose()
            basic = b"proxy-authorization: basic " + __import__("base64").b64encode(b"user:p@ss").lower()
            assert [line.lower() for line in proxy.seen] == [
                b"connect localhost:%d http/1.1 | " % tls_port + basic,
                b"post http://127.0.0.1:%d/v1/chat/completions http/1.1 | " % plain_port + basic,
            ]
        async with (
            MiniProxy(refuse=True) as strict,
            provider_client(transport, proxy=f"http://127.0.0.1:{strict.port}") as client,
        ):
            with pytest.raises(httpx.HTTPError, match=r"407|Proxy Authentication"):
                await send(client, "POST", f"https://localhost:{tls_port}/x")
    finally:
        tls_server.close()
        plain_server.close()


async def test_environment_proxies_and_no_proxy_with_trust_env(
    tls_files: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    echo = lambda path: b"data: " + path + b"\n\n"  # noqa: E731
    plain_server, plain_port = await start_sse_server(echo)
    try:
        async with MiniProxy() as proxy:
            monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
            monkeypatch.setenv("NO_PROXY", "localhost")
            for trust_env in (True, False):
                async with provider_client("httpx", trust_env=trust_env) as client:
                    for host in ("127.0.0.1", "localhost"):
                        response = await send(client, "POST", f"http://{host}:{plain_port}/v1/chat/completions")
                        assert await response.aread() == b"data: /v1/chat/completions\n\n"
                        await response.aclose()
            # through the proxy only with trust_env, and not for the NO_PROXY host
            assert proxy.seen == [b"POST http://127.0.0.1:%d/v1/chat/completions HTTP/1.1" % plain_port]
    finally:
        plain_server.close()


async def test_a_socks5_proxy_with_the_httpx_transport() -> None:
    pytest.importorskip("socksio")
    echo = lambda path: b"data: " + path + b"\n\n"  # noqa: E731
    plain_server, plain_port = await start_sse_server(echo)
    asked: list[tuple[str, int]] = []

    async def socks5(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """RFC 1928, no auth, CONNECT only: enough to see the request go through it."""
        try:
            _, n = await reader.readexactly(2)
            await reader.readexactly(n)
            writer.write(b"\x05\x00")
            _, _, _, kind = await reader.readexactly(4)
            host = (
                (await reader.readexactly(4))
                if kind == 1
                else (await reader.readexactly((await reader.readexactly(1))[0]))
            )
            port = int.from_bytes(await reader.readexactly(2), "big")
            name = ".".join(str(b) for b in host) if kind == 1 else host.decode()
            asked.append((name, port))
            up_reader, up_writer = await asyncio.open_connection(name, port)
            writer.write(b"\x05\x00\x00\x01\x7f\x00\x00\x01\x00\x00")

            async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
                try:
                    while data := await src.read(65536):
                        dst.write(data)
                        await dst.drain()
                finally:
                    dst.close()

            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer), return_exceptions=True)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    proxy = await asyncio.start_server(socks5, "127.0.0.1", 0)
    try:
        proxy_port = proxy.sockets[0].getsockname()[1]
        async with provider_client("httpx", proxy=f"socks5://127.0.0.1:{proxy_port}") as client:
            response = await send(client, "POST", f"http://127.0.0.1:{plain_port}/v1/messages")
            assert await response.aread() == b"data: /v1/messages\n\n"
            await response.aclose()
        assert asked == [("127.0.0.1", plain_port)]
    finally:
        proxy.close()
        plain_server.close()


def test_what_only_the_httpx_transport_does_is_refused_on_the_gateway_one_with_a_clear_message() -> None:
    from pydantic import ValidationError

    from gateway.settings import ProviderSettings

    for settings, message in (
        ({"http2": True}, 'http2 needs transport = "httpx"'),
        ({"trust_env": True}, 'trust_env needs transport = "httpx"'),
        ({"proxy": "socks5://127.0.0.1:1080"}, 'SOCKS or https:// proxy needs transport = "httpx"'),
        ({"proxy": "ftp://127.0.0.1:21"}, "proxy must be an http://"),
    ):
        with pytest.raises(ValidationError, match=message.replace("(", r"\(")):
            ProviderSettings(name="p", dialect="openai-chat", **settings)  # type: ignore[arg-type]
    ProviderSettings(
        name="p", dialect="openai-chat", transport="httpx", http2=True, trust_env=True, proxy="socks5://127.0.0.1:1080"
    )


async def test_http2_upstream_with_the_httpx_transport(tls_files: tuple[str, str]) -> None:
    """A loopback HTTP/2 server (hypercorn, TLS with ALPN h2): the stream arrives whole over h2."""
    pytest.importorskip("h2")
    hypercorn_asyncio = pytest.importorskip("hypercorn.asyncio")
    from hypercorn.config import Config

    from gateway.dialects.base import UpstreamCall

    seen: list[str] = []

    async def app(scope, receive, send_):  # type: ignore[no-untyped-def]
        if scope["type"] != "http":
            return
        seen.append(scope["http_version"])
        while (await receive()).get("more_body"):
            pass
        await send_(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
        )
        for i in range(3):
            await send_({"type": "http.response.body", "body": b"data: %d\n\n" % i, "more_body": True})
        await send_({"type": "http.response.body", "body": b""})

    cert, key = tls_files
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.certfile, config.keyfile = cert, key
    config.alpn_protocols = ["h2", "http/1.1"]
    config.accesslog = config.errorlog = None
    stop = asyncio.Event()
    bound: list[str] = []

    async def serve() -> None:
        # hypercorn reports the port it bound to in its startup log; take it from the socket instead
        await hypercorn_asyncio.serve(app, config, shutdown_trigger=stop.wait)  # type: ignore[arg-type]

    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    config.bind = [f"127.0.0.1:{port}"]
    task = asyncio.create_task(serve())
    try:
        for _ in range(100):
            try:
                _, w = await asyncio.open_connection("127.0.0.1", port)
                w.close()
                break
            except OSError:
                await asyncio.sleep(0.05)
        provider = started_provider("httpx", f"https://localhost:{port}/v1", http2=True, ca_file=cert)
        provider.start()
        for _ in range(2):
            response = await provider.send(UpstreamCall(path="/chat/completions", body={"a": 1}))
            assert response.http_version == "HTTP/2"
            assert await response.aread() == b"data: 0\n\ndata: 1\n\ndata: 2\n\n"
            await provider.close_response(response)
        await provider.close()
        assert seen == ["2", "2"]
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)
    del bound


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_stdlib_http_server_upstream_http10_body_until_close(transport: str) -> None:
    # Simple fakes are often http.server: HTTP/1.0, no content-length, the body ends with the socket.
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["content-length"]))
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            for i in range(3):
                self.wfile.write(b"data: %d\n\n" % i)
                self.wfile.flush()

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        async with provider_client(transport) as client:
            for _ in range(2):
                response = await send(client, "POST", f"http://127.0.0.1:{httpd.server_address[1]}/v1/messages")
                assert response.status_code == 200
                assert await response.aread() == b"data: 0\n\ndata: 1\n\ndata: 2\n\n"
                await response.aclose()
            if transport == "gateway":
                assert client._transport.open_connections == 0  # type: ignore[attr-defined]  # not kept: HTTP/1.0
    finally:
        httpd.shutdown()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_redirecting_upstream_is_a_clear_502(transport: str) -> None:
    from gateway.errors import GatewayError
    from gateway.ir import ChatRequest, Message, TextPart
    from gateway.relay.attempts import open_upstream
    from gateway.routing.router import Router
    from gateway.settings import Settings
    from gateway.upstream.providers import Provider

    def answer(writer, head, body, index):
        writer.write(
            b"HTTP/1.1 301 Moved Permanently\r\nlocation: https://api.example.com/v1/messages\r\ncontent-length: 0\r\n\r\n"
        )

    async with ScriptedServer(answer) as server:
        settings = Settings(
            providers=[
                {
                    "name": "up",
                    "dialect": "anthropic",
                    "base_url": server.url,
                    "api_key": "k",
                    "max_retries": 0,
                    "transport": transport,
                }
            ],
            routes=[{"model": "m", "provider": "up"}],
            store={"url": "sqlite://:memory:"},
        )
        providers = {p.name: Provider(p) for p in settings.providers}
        providers["up"].start()
        req = ChatRequest(model="m", messages=[Message("user", [TextPart("hi")])], max_tokens=5, stream=True)
        with pytest.raises(GatewayError) as err:
            await open_upstream(providers, req, Router(settings).resolve("m"))
        assert (
            err.value.status == 502
            and "redirected (HTTP 301 to https://api.example.com/v1/messages)" in err.value.message
        )
        assert len(server.requests) == 1  # not followed
        await providers["up"].close()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_body_that_does_not_inflate_is_an_http_error(transport: str) -> None:
    def answer(writer, head, body, index):
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-length: 9\r\n\r\nnot gzip!")

    async with ScriptedServer(answer) as server, provider_client(transport) as client:
        response = await send(client, "POST", server.url)
        with pytest.raises(httpx.DecodingError):  # an HTTPError: the relay makes it a 502 in dialect
            await response.aread()
        await response.aclose()
