"""The benchmark's own tools: bench/fake_upstream.py and bench/loadgen.py, pointed at each other.

If these are wrong, every number in bench/README.md is wrong, so: every dialect's stream verifies
(exact text, fragment count, terminator), and a corrupted stream is never counted as verified.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import fake_upstream  # noqa: E402
import loadgen  # noqa: E402

DIALECTS = ["anthropic", "openai-chat", "openai-responses", "gemini"]
BASE = {"anthropic": "", "openai-chat": "/v1", "openai-responses": "/v1", "gemini": ""}


@pytest.fixture(scope="module")
def fake_url() -> Iterator[str]:
    with fake_upstream.ServerThread(chunks=50) as port:
        yield f"http://127.0.0.1:{port}"


def run(coro):  # the tests own their loop; no pytest-asyncio fixtures needed
    return asyncio.run(coro)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("chunks", [1, 50, 137])
def test_every_stream_verifies(fake_url: str, dialect: str, chunks: int) -> None:
    res = run(
        loadgen.run_load(fake_url + BASE[dialect], dialect, "bench-model", concurrency=3, requests=9, chunks=chunks)
    )
    assert res.errors == 0, res.error_samples
    assert res.verified == 9
    assert len(res.ttfb) == 9 and all(t > 0 for t in res.ttfb)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_chunk_count_from_model_name(fake_url: str, dialect: str) -> None:
    # what the gateway forwards is the model name, not our header: "chunks<N>" in it sets N
    res = run(
        loadgen.run_load(
            fake_url + BASE[dialect],
            dialect,
            "bench-chunks7",
            concurrency=1,
            requests=2,
            chunks=7,
            extra_headers={"x-bench-chunks": "7"},
        )
    )
    assert (res.verified, res.errors) == (2, 0), res.error_samples
    path, headers, body = loadgen.build_request(dialect, "bench-chunks7")
    headers.pop("x-bench-chunks", None)
    conn = loadgen.Conn("127.0.0.1", int(fake_url.rsplit(":", 1)[1]))

    async def one() -> tuple[int, bytes, float, bool]:
        try:
            return await conn.request(BASE[dialect] + path, headers, body, 5)
        finally:
            await conn.close()

    status, data, _, complete = run(one())
    assert loadgen.verify(dialect, status, data, 7, complete).ok


@pytest.mark.parametrize("dialect", DIALECTS)
def test_spread_reply_sends_each_event_on_its_own(fake_url: str, dialect: str) -> None:
    # "gap<N>" in the model name: the same reply, one write per event N µs apart (run.py --gap-us)
    import time

    started = time.perf_counter()
    res = run(
        loadgen.run_load(
            fake_url + BASE[dialect], dialect, "bench-chunks20-gap5000", concurrency=1, requests=1, chunks=20
        )
    )
    assert (res.verified, res.errors) == (1, 0), res.error_samples
    assert time.perf_counter() - started > 20 * 0.005  # the gaps really happened


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("corrupt", ["text", "count", "truncate"])
def test_corrupted_stream_is_not_verified(fake_url: str, dialect: str, corrupt: str) -> None:
    res = run(
        loadgen.run_load(
            fake_url + BASE[dialect],
            dialect,
            "bench-model",
            concurrency=2,
            requests=4,
            chunks=20,
            extra_headers={"x-bench-corrupt": corrupt},
        )
    )
    assert res.verified == 0
    assert res.errors == 4
    reason = next(iter(res.error_samples))
    expected = {"text": "text mismatch", "count": "fragment count", "truncate": "no terminator"}[corrupt]
    if dialect == "gemini" and corrupt == "truncate":
        expected = "no terminator"  # the finishReason chunk is the one dropped
    assert expected in reason


def test_wrong_expected_count_is_not_verified(fake_url: str) -> None:
    # the fake sends 50; a load generator expecting 49 must refuse every stream
    res = run(
        loadgen.run_load(
            fake_url,
            "anthropic",
            "bench-model",
            concurrency=1,
            requests=2,
            chunks=49,
            extra_headers={"x-bench-chunks": "50"},
        )
    )
    assert (res.verified, res.errors) == (0, 2)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_verify_rejects_hand_corrupted_bodies(dialect: str) -> None:
    body = b"".join(fake_upstream.events(dialect, 10))
    assert loadgen.verify(dialect, 200, body, 10).ok
    # status, one changed character, a cut body, an unfinished HTTP body, an in-stream error
    assert not loadgen.verify(dialect, 500, body, 10).ok
    frag = fake_upstream.fragment(3).encode()
    assert body.count(frag) >= 1
    assert not loadgen.verify(dialect, 200, body.replace(frag, frag.replace(b"3", b"4"), 1), 10).ok
    assert not loadgen.verify(dialect, 200, body[: len(body) // 2], 10).ok
    # the final blank line gone ("\r\n\r" would still end on a blank line: CR alone is a line end)
    assert not loadgen.verify(dialect, 200, body[: -2 if dialect == "gemini" else -1], 10).ok
    assert not loadgen.verify(dialect, 200, body, 10, body_complete=False).ok
    error = {
        "anthropic": b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n',
        "openai-chat": b'data: {"error":{"message":"boom","type":"server_error"}}\n\n',
        "openai-responses": b'event: error\ndata: {"type":"error","code":"server_error","message":"boom","sequence_number":99}\n\n',
        "gemini": b'data: {"error":{"code":500,"message":"boom","status":"INTERNAL"}}\r\n\r\n',
    }[dialect]
    events = fake_upstream.events(dialect, 10)
    assert not loadgen.verify(dialect, 200, b"".join(events[:4]) + error, 10).ok


def test_openai_chat_needs_done_exactly_once() -> None:
    events = fake_upstream.events("openai-chat", 5)
    assert loadgen.verify("openai-chat", 200, b"".join(events), 5).ok
    assert not loadgen.verify("openai-chat", 200, b"".join(events[:-1]), 5).ok
    assert not loadgen.verify("openai-chat", 200, b"".join(events) + b"data: [DONE]\n\n", 5).ok


def test_fake_stats_count_connections(fake_url: str) -> None:
    import json
    import urllib.request

    def stats() -> dict:
        with urllib.request.urlopen(fake_url + "/stats", timeout=2) as r:
            return json.loads(r.read())

    before = stats()
    res = run(loadgen.run_load(fake_url, "anthropic", "bench-model", concurrency=2, requests=10, chunks=5))
    after = stats()
    assert res.verified == 10
    assert after["requests"] - before["requests"] >= 10
    assert after["connections"] - before["connections"] <= 3  # keep-alive: 2 workers, + the first stats call


def test_fake_replies_are_well_formed_sse() -> None:
    for dialect in DIALECTS:
        body = b"".join(fake_upstream.events(dialect, 5)).decode()
        frames, clean = loadgen.parse_sse(body)
        assert clean and frames
        if dialect == "gemini":
            assert "\r\n\r\n" in body and "[DONE]" not in body
        if dialect == "openai-responses":
            import json

            seqs = [json.loads(d)["sequence_number"] for _, d in frames]
            assert seqs == list(range(len(frames)))
