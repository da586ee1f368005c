"""The edge (issue 18, items 2, 3, 5, 6): compressed bodies, unknown paths and methods, path
tricks, protocol upgrades and conflicting credentials, each answered at once in a dialect's shape,
through the real server (the gateway's own uvicorn protocol) with nothing sent upstream."""

from __future__ import annotations

import gzip
import socket
import time
import zlib
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from gateway.server.app import create_app
from gateway.server.protocol import uvicorn_options
from gateway.settings import Settings
from tests.conftest import gateway_config
from tests.server.test_bad_input_validation import BASE, check_shape
from tests.support.fake_upstream import ServerThread

DIALECTS = list(BASE)
GATEWAY_KEY = "gw-key-edge"


def post_raw(gateway: Any, dialect: str, content: bytes, **headers: str) -> httpx.Response:
    return httpx.post(
        gateway.url + BASE[dialect][0],
        content=content,
        headers={"content-type": "application/json", **headers},
        timeout=10,
    )


def body_bytes(dialect: str) -> bytes:
    return orjson.dumps(BASE[dialect][1])


# ------------------------------------------------------------------ 2. content encodings


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("coding", ["gzip", "x-gzip", "deflate", "deflate-raw", "identity"])
def test_a_compressed_body_is_inflated(gateway: Any, dialect: str, coding: str) -> None:
    raw = body_bytes(dialect)
    if coding in ("gzip", "x-gzip"):
        data = gzip.compress(raw)
    elif coding == "deflate":
        data = zlib.compress(raw)
    elif coding == "deflate-raw":  # some clients send deflate without the zlib wrapper
        c = zlib.compressobj(wbits=-15)
        data, coding = c.compress(raw) + c.flush(), "deflate"
    else:
        data = raw
    response = post_raw(gateway, dialect, data, **{"content-encoding": coding})
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("coding", ["br", "zstd", "compress", "snappy", "gzip, br"])
def test_an_unsupported_encoding_is_415(gateway: Any, fake: Any, dialect: str, coding: str) -> None:
    before = len(fake.received)
    body = check_shape(dialect, 415, post_raw(gateway, dialect, body_bytes(dialect), **{"content-encoding": coding}))
    assert "Content-Encoding" in str(body)
    assert len(fake.received) == before


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("case", ["not-gzip", "truncated", "trailing-garbage"])
def test_a_body_that_does_not_inflate_is_400(gateway: Any, fake: Any, dialect: str, case: str) -> None:
    good = gzip.compress(body_bytes(dialect))
    data = {
        "not-gzip": body_bytes(dialect),
        "truncated": good[: len(good) // 2],
        "trailing-garbage": good + b"garbage",
    }[case]
    before = len(fake.received)
    body = check_shape(dialect, 400, post_raw(gateway, dialect, data, **{"content-encoding": "gzip"}))
    assert "inflate" in str(body)
    assert len(fake.received) == before


@pytest.fixture(scope="module")
def small_gateway(fake: Any) -> Iterator[ServerThread]:
    """max_body_bytes = 1 MiB, so a bomb is quick to build."""
    settings = Settings(**gateway_config(f"http://127.0.0.1:{fake.port}", max_body_bytes=1 << 20))
    with ServerThread(create_app(settings), **uvicorn_options()) as server:
        yield server


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_compression_bomb_is_413_without_inflating_it_all(small_gateway: Any, fake: Any, dialect: str) -> None:
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    head = body_bytes(dialect)[:-1] + b', "pad": "'
    zeros = b"0" * (1 << 20)
    bomb = (
        c.compress(head) + b"".join(c.compress(zeros) for _ in range(512)) + c.compress(b'"}') + c.flush()
    )  # 512 MiB inflated
    assert len(bomb) < 1 << 20  # the compressed body is under the limit
    before = len(fake.received)
    started = time.monotonic()
    body = check_shape(dialect, 413, post_raw(small_gateway, dialect, bomb, **{"content-encoding": "gzip"}))
    assert time.monotonic() - started < 2.0  # inflating 512 MiB would take longer
    assert "inflated" in str(body)
    assert len(fake.received) == before


# ------------------------------------------------------------------ 3. unknown paths, methods, path tricks

# (method, path, headers, dialect whose shape the answer must have, status)
UNKNOWN = [
    ("POST", "/v1/nothing-here", {}, "openai-chat", 404),
    ("GET", "/", {}, "openai-chat", 404),
    ("POST", "/v1/nothing-here", {"anthropic-version": "2023-06-01"}, "anthropic", 404),
    ("POST", "/v1/messages/batches", {}, "anthropic", 404),
    ("POST", "/v1beta/cachedContents", {}, "gemini", 404),
    ("POST", "/v1/files", {"x-goog-api-key": "k"}, "gemini", 404),
    ("POST", "/v1/files?key=k", {}, "gemini", 404),
    ("GET", "/v1/messages", {}, "anthropic", 405),
    ("PUT", "/v1/chat/completions", {}, "openai-chat", 405),
    ("DELETE", "/v1/responses", {}, "openai-responses", 405),
    ("GET", "/v1beta/models/demo:generateContent", {}, "gemini", 404),
    ("PATCH", "/v1beta/interactions", {}, "gemini-interactions", 405),
    ("POST", "/healthz", {}, "openai-chat", 405),
]


@pytest.mark.parametrize(
    "method,path,headers,dialect,status", UNKNOWN, ids=[f"{m} {p} {h}" for m, p, h, _, _ in UNKNOWN]
)
def test_unknown_paths_and_methods_answer_in_a_dialects_shape(
    gateway: Any, method: str, path: str, headers: dict[str, str], dialect: str, status: int
) -> None:
    response = httpx.request(method, gateway.url + path, headers=headers, json={}, timeout=10)
    check_shape(dialect, status, response)
    if status == 405:
        assert response.headers["allow"], response.headers
        assert method not in response.headers["allow"].split(", ")


TRICKS = [
    "/v1/../v1/messages",
    "/v1/chat/../chat/completions",
    "/v1/./chat/completions",
    "/v1/%2e%2e/v1/messages",
    "/v1/chat%2Fcompletions",
    "/v1%2fresponses",
    "/v1/chat%5Ccompletions",
    "//v1/chat/completions",
    "/v1//chat/completions",
    "/v1/chat/completions%00",
    "/v1/messages%0d%0aX-Injected:%201",
    "/v1beta/models/../tunedModels/x:generateContent",
    "/v1beta/models/up-gemini%2Fgemini--text:generateContent",
    "/v1beta/models//demo:generateContent",
]


def raw_request(port: int, data: bytes, timeout: float = 5.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except TimeoutError:
                raise AssertionError(f"the gateway held the connection open; got {out[:300]!r}") from None
            if not chunk:
                return out
            out += chunk


@pytest.mark.parametrize("path", TRICKS)
def test_path_tricks_are_404_in_a_dialects_shape_never_routed(gateway: Any, fake: Any, path: str) -> None:
    before = len(fake.received)
    body = orjson.dumps({"model": "anthropic--text", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
    head = f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n"
    answer = raw_request(gateway.port, head.encode() + body)
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line.split()[1] == b"404", answer[:300]
    payload = orjson.loads(rest.split(b"\r\n\r\n", 1)[1])
    assert payload["error"]["message"]
    assert b"x-injected" not in answer.lower().split(b"\r\n\r\n")[0]
    assert len(fake.received) == before


# ------------------------------------------------------------------ 5. upgrade headers


@pytest.mark.parametrize(
    "head",
    [
        # /v1/responses serves the WebSocket (tests/server/test_websocket.py); elsewhere a 426 makes
        # a client fall back to HTTP at once
        "GET /v1/chat/completions HTTP/1.1\r\nhost: x\r\nconnection: Upgrade\r\nupgrade: websocket\r\nsec-websocket-version: 13\r\n"
        "sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nauthorization: Bearer k\r\n\r\n",
        "GET /v1/messages HTTP/1.1\r\nhost: x\r\nconnection: Upgrade\r\nupgrade: websocket\r\nsec-websocket-version: 13\r\n"
        "sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    ],
    ids=["chat-path", "anthropic-path"],
)
def test_a_websocket_handshake_is_426_at_once(gateway: Any, head: str) -> None:
    started = time.monotonic()
    answer = raw_request(gateway.port, head.encode(), timeout=3)
    assert time.monotonic() - started < 1.5
    assert answer.startswith(b"HTTP/1.1 426 "), answer[:200]
    assert orjson.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["message"]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("upgrade", ["websocket", "h2c"])
def test_an_upgrade_header_on_a_post_is_answered_at_once(gateway: Any, dialect: str, upgrade: str) -> None:
    body = body_bytes(dialect)
    extra = (
        "http2-settings: AAMAAABkAARAAAAAAAIAAAAA\r\nconnection: Upgrade, HTTP2-Settings\r\n"
        if upgrade == "h2c"
        else "connection: Upgrade\r\n"
    )
    head = f"POST {BASE[dialect][0]} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n{extra}upgrade: {upgrade}\r\n\r\n"
    started = time.monotonic()
    answer = raw_request(gateway.port, head.encode() + body, timeout=3)  # the connection must end, not hang
    assert time.monotonic() - started < 2.0
    status = int(answer.split()[1])
    # a WebSocket handshake is 426 (Codex falls back on it); other upgrades with a body cannot be read
    # as HTTP by llhttp (the body would be the new protocol's bytes): 400, never parsed as empty
    assert status == (426 if upgrade == "websocket" else 400), answer[:300]
    assert orjson.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["message"]


@pytest.mark.parametrize("dialect", ["openai-chat", "gemini"])
def test_an_h2c_upgrade_without_a_body_is_served_as_http(gateway: Any, dialect: str) -> None:
    path = "/v1/models" if dialect == "openai-chat" else "/v1beta/models"
    head = f"GET {path} HTTP/1.1\r\nhost: x\r\nconnection: Upgrade, HTTP2-Settings\r\nupgrade: h2c\r\nhttp2-settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n"
    answer = raw_request(gateway.port, head.encode(), timeout=3)
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:300]


# ------------------------------------------------------------------ 6. conflicting credentials


@pytest.fixture(scope="module")
def authed_gateway(fake: Any) -> Iterator[ServerThread]:
    config = gateway_config(f"http://127.0.0.1:{fake.port}")
    config["auth"] = {"keys": [GATEWAY_KEY, "gw-key-other"], "keys_env": ""}
    with ServerThread(create_app(Settings(**config)), **uvicorn_options()) as server:
        yield server


def raw_post(port: int, path: str, headers: list[tuple[str, str]], body: bytes) -> tuple[int, bytes]:
    lines = "".join(f"{k}: {v}\r\n" for k, v in headers)
    head = f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\nconnection: close\r\n{lines}\r\n"
    answer = raw_request(port, head.encode() + body)
    return int(answer.split()[1]), answer.split(b"\r\n\r\n", 1)[1]


CONFLICTS = [
    ("anthropic", "", [("x-api-key", GATEWAY_KEY), ("x-api-key", "gw-key-other")]),
    ("anthropic", "", [("x-api-key", GATEWAY_KEY), ("authorization", "Bearer gw-key-other")]),
    ("anthropic", "", [("x-api-key", "gw-key-other"), ("authorization", f"Bearer {GATEWAY_KEY}")]),
    ("openai-chat", "", [("authorization", f"Bearer {GATEWAY_KEY}"), ("authorization", "Bearer wrong")]),
    ("openai-responses", "", [("authorization", f"Bearer {GATEWAY_KEY}"), ("x-api-key", "wrong")]),
    ("gemini", "?key=gw-key-other", [("x-goog-api-key", GATEWAY_KEY)]),
    ("gemini", f"?key={GATEWAY_KEY}&key=wrong", []),
    ("gemini-interactions", "?key=wrong", [("x-goog-api-key", GATEWAY_KEY)]),
]


@pytest.mark.parametrize(
    "dialect,query,headers", CONFLICTS, ids=[f"{d}-{q}-{[h[0] for h in hs]}" for d, q, hs in CONFLICTS]
)
def test_two_different_credentials_are_401_never_first_wins(
    authed_gateway: Any, fake: Any, dialect: str, query: str, headers: list[tuple[str, str]]
) -> None:
    before = len(fake.received)
    status, payload = raw_post(authed_gateway.port, BASE[dialect][0] + query, headers, body_bytes(dialect))
    assert status == 401, payload
    assert b"two different API keys" in payload
    assert len(fake.received) == before


AGREEING = [
    ("anthropic", "", [("x-api-key", GATEWAY_KEY), ("authorization", f"Bearer {GATEWAY_KEY}")]),
    ("openai-chat", "", [("authorization", f"Bearer {GATEWAY_KEY}")]),
    ("gemini", f"?key={GATEWAY_KEY}", [("x-goog-api-key", GATEWAY_KEY)]),
]


@pytest.mark.parametrize("dialect,query,headers", AGREEING)
def test_the_same_credential_twice_is_fine(
    authed_gateway: Any, dialect: str, query: str, headers: list[tuple[str, str]]
) -> None:
    status, payload = raw_post(authed_gateway.port, BASE[dialect][0] + query, headers, body_bytes(dialect))
    assert status == 200, payload
