"""What the response cache costs: the key of a request, a lookup that misses, and a hit replayed
to the caller — against a SQLite file, measured on the real classes; and, end to end over loopback
HTTP, a hit against the upstream round trip it replaces.

    .venv/bin/python bench/cache_cost.py [-n 2000]

Prints mean wall and CPU time per operation. The request is an agent turn of some size: a system
prompt, 20 turns, two tools; the answer is the OpenAI-chat ``long_500`` capture (500 deltas).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.dialects.base import EncodeContext, RequestMeta
from gateway.dialects.registry import codec_for
from gateway.framing.sse import SSEDecoder
from gateway.relay.cache import ResponseCache, Ticket, request_key
from gateway.routing.router import Resolved, Target
from gateway.settings import CacheSettings
from gateway.store import open_store
from gateway.telemetry.observe import AccessRecord, Metrics
from gateway.upstream.providers import Provider  # noqa: F401  (a provider object for the replay)

ROOT = Path(__file__).resolve().parents[1]
TOOL = {
    "type": "function",
    "function": {"name": "read_file", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}},
}
BODY: dict[str, Any] = {
    "model": "smart",
    "max_tokens": 1024,
    "tools": [TOOL, {**TOOL, "function": {**TOOL["function"], "name": "write_file"}}],
    "messages": [{"role": "system", "content": "You are a coding agent. " * 40}]
    + [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: " + "some words " * 30}
        for i in range(20)
    ],
}


def timed(fn: Any, n: int) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(n):
        fn()
    return (time.perf_counter() - wall) / n * 1e6, (time.process_time() - cpu) / n * 1e6


async def main(n: int) -> None:
    codec = codec_for("openai-chat")
    req = codec.parse_request(dict(BODY), RequestMeta())
    req.dialect = "openai-chat"
    key_us = timed(lambda: request_key("smart", "", req), n)
    print(f"key of a request (20 turns, 2 tools): {key_us[0]:.1f} µs wall, {key_us[1]:.1f} µs CPU")

    decoder, frames = codec.stream_decoder(), SSEDecoder()
    events = []
    for frame in frames.feed((ROOT / "captures/openai-chat/long_500.sse").read_bytes()):
        events += decoder.feed(frame)
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{tmp}/bench.db", 3600)
        cache = ResponseCache(CacheSettings(enabled=True), store, Metrics())

        class _Provider:
            name, dialect = "up", "openai-chat"

        providers: Any = {"up": _Provider()}
        record = AccessRecord("r", "openai-chat", "/v1/chat/completions")
        record.provider, record.upstream_dialect, record.upstream_model = "up", "openai-chat", "gpt"
        record.input_tokens, record.output_tokens = 100, 500
        ticket = Ticket("hit", "smart", True, True)
        ticket.events = list(events)
        await cache.keep(ticket, record)
        resolved = Resolved("smart", (Target("up", "gpt"),))
        del resolved

        async def lookups(key: str) -> tuple[float, float]:
            wall, cpu = time.perf_counter(), time.process_time()
            for _ in range(n):
                await cache.replay(Ticket(key, "smart", True, True), providers, record, [])
            return (time.perf_counter() - wall) / n * 1e6, (time.process_time() - cpu) / n * 1e6

        miss = await lookups("absent")
        print(f"lookup that misses (SQLite file): {miss[0]:.1f} µs wall, {miss[1]:.1f} µs CPU")
        hit = await lookups("hit")
        print(f"lookup that hits, 500-delta answer read and rebuilt: {hit[0]:.1f} µs wall, {hit[1]:.1f} µs CPU")
        opened = await cache.replay(Ticket("hit", "smart", True, True), providers, record, [])
        assert opened is not None
        ctx = EncodeContext(model="smart", upstream_dialect="openai-chat", request=req)

        def encode() -> None:
            enc = codec.stream_encoder(ctx)
            b"".join(enc.encode(e) for e in opened.first)

        enc_us = timed(encode, n)
        print(
            f"the hit encoded as the caller's stream ({len(opened.first)} events): {enc_us[0]:.1f} µs wall, {enc_us[1]:.1f} µs CPU"
        )
        raw = (ROOT / "captures/openai-chat/long_500.sse").read_bytes()

        def relay() -> None:  # what a miss spends on the same answer: frames decoded, events encoded
            dec, fr, enc = codec.stream_decoder(), SSEDecoder(), codec.stream_encoder(ctx)
            b"".join(enc.encode(e) for f in fr.feed(raw) for e in dec.feed(f))

        relay_us = timed(relay, max(1, n // 10))
        print(
            f"the same answer relayed from upstream (decode + encode, no HTTP): {relay_us[0]:.1f} µs wall, {relay_us[1]:.1f} µs CPU"
        )
        await store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=2000)
    asyncio.run(main(parser.parse_args().n))
