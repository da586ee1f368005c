"""Keepalives come on time: during an upstream silence no gap between two writes to the caller
exceeds ``keepalive_seconds`` (+0.5 s), whatever the provider's ``idle_timeout``.

Real sockets end to end: the fake upstream sends half an answer, goes silent for 20 s, then sends
the rest; the caller is a raw socket that stamps every read. Two gateways (keepalive 5 s with idle
timeout 60 s, keepalive 15 s with idle timeout 25 s) serve four caller dialects at once, so the
whole test costs one silence.
"""

from __future__ import annotations

import itertools
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.conftest import gateway_config
from tests.support.fake_upstream import FakeUpstream, ServerThread

SILENCE = 20.0
SLACK = 0.5
GATEWAYS = [(5.0, 60.0), (15.0, 25.0)]  # (keepalive_seconds, idle_timeout)

# caller -> (path, body, keepalive marker, terminator); each through another upstream dialect
REQUESTS: dict[str, tuple[str, dict[str, Any], bytes, bytes]] = {
    "anthropic": (
        "/v1/messages",
        {
            "model": "anthropic--pause",
            "max_tokens": 50,
            "stream": True,
            "messages": [{"role": "user", "content": "hi"}],
        },
        b"event: ping",
        b"message_stop",
    ),
    "openai-chat": (
        "/v1/chat/completions",
        {"model": "gemini--pause", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
        b"\n:",
        b"[DONE]",
    ),
    "openai-responses": (
        "/v1/responses",
        {"model": "openai-chat--pause", "stream": True, "store": False, "input": "hi"},
        b"\n:",
        b"response.completed",
    ),
    "gemini-interactions": (
        "/v1beta/interactions",
        {"model": "openai-responses--pause", "stream": True, "store": False, "input": "hi"},
        b"\n:",
        b"[DONE]",
    ),
}


@pytest.fixture(scope="module")
def silent_upstream() -> Iterator[FakeUpstream]:
    upstream = FakeUpstream(pause_seconds=SILENCE)
    with ServerThread(upstream) as server:
        upstream.port = server.port
        yield upstream


def read_stamped(url: str, path: str, body: dict[str, Any], out: dict[str, Any]) -> None:
    """POST over a raw socket; every read's arrival time and the whole body."""
    host, port = url.removeprefix("http://").split(":")
    payload = orjson.dumps(body)
    request = (
        f"POST {path} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(payload)}\r\nconnection: close\r\n\r\n"
    ).encode() + payload
    stamps: list[float] = []
    received = b""
    with socket.create_connection((host, int(port)), timeout=SILENCE + 15) as sock:
        sock.sendall(request)
        while chunk := sock.recv(65536):
            stamps.append(time.monotonic())
            received += chunk
    out["stamps"], out["raw"] = stamps, received


def test_no_gap_between_writes_exceeds_the_keepalive_interval(silent_upstream: FakeUpstream) -> None:
    servers = []
    for keepalive, idle in GATEWAYS:
        config = gateway_config(f"http://127.0.0.1:{silent_upstream.port}", keepalive_seconds=keepalive)
        for provider in config["providers"]:
            provider["idle_timeout"] = idle
        servers.append(ServerThread(create_app(Settings(**config))))
    results: dict[tuple[float, str], dict[str, Any]] = {}
    threads = []
    try:
        for server in servers:
            server.__enter__()
        for (keepalive, _), server in zip(GATEWAYS, servers):
            for caller, (path, body, _, _) in REQUESTS.items():
                results[(keepalive, caller)] = out = {}
                threads.append(threading.Thread(target=read_stamped, args=(server.url, path, body, out)))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(SILENCE + 20)
    finally:
        for server in servers:
            server.__exit__(None, None, None)
    for (keepalive, caller), out in results.items():
        _, _, marker, terminator = REQUESTS[caller]
        raw, stamps = out["raw"], out["stamps"]
        assert terminator in raw, f"{caller} @ {keepalive:g}s: the answer did not finish: {raw[-300:]!r}"
        assert raw.count(marker) >= int(SILENCE // keepalive) - 1, f"{caller} @ {keepalive:g}s: too few keepalives"
        gaps = [b - a for a, b in itertools.pairwise(stamps)]
        assert stamps[-1] - stamps[0] >= SILENCE - 1, f"{caller}: the upstream silence did not happen"
        worst = max(gaps)
        print(f"{caller} keepalive {keepalive:g}s: {len(stamps)} reads, longest gap {worst:.2f}s")
        assert worst <= keepalive + SLACK, f"{caller} @ keepalive {keepalive:g}s: {worst:.2f}s between two writes"
